/**
 * Pluggable component containers of a pod: the ones injected from Components that carry
 * `rt.io/component-container`, and the ones the pod lists in `rt.io/pluggable-components`.
 * Each gets the socket folder; in native mode it becomes a native sidecar. It gets no startup
 * probe of ours: a probe that looks for the socket needs a shell in the component's image, which
 * a distroless one has not. The runtime waits for the sockets itself (`--wait-for-sockets`), and
 * its own startup probe holds the app until then. A probe the component brings is kept.
 */
import { ALIAS_PREFIX, PREFIX } from './annotations.ts';
import type { ComponentObject } from './components.ts';
import { addEnv, type Container } from './pod.ts';
import { SOCKETS_VOLUME } from './sidecar-container.ts';

export const CONTAINER_ANNOTATION = `${PREFIX}component-container`;
const CONTAINER_ANNOTATION_ALIAS = `${ALIAS_PREFIX}component-container`;

export interface ComponentContainer {
  container: Container;
  /** Socket names (file name without .sock) this container is expected to create. */
  sockets: string[];
}

export interface InjectedComponents {
  containers: ComponentContainer[];
  warnings: string[];
  /** Components whose container annotation is not a usable container: the pod is denied. */
  errors: string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The Components of the namespace scoped to the app with a container annotation, as containers. */
export function injectedComponents(components: ComponentObject[], appId: string): InjectedComponents {
  const byName = new Map<string, ComponentContainer>();
  const warnings: string[] = [];
  const errors: string[] = [];
  const sorted = [...components].sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  for (const comp of sorted) {
    const ann = comp.metadata?.annotations ?? {};
    const raw = ann[CONTAINER_ANNOTATION] ?? ann[CONTAINER_ANNOTATION_ALIAS];
    if (raw === undefined) continue;
    const id = `Component ${comp.metadata?.namespace}/${comp.metadata?.name}`;
    const scopes = Array.isArray(comp.scopes) ? comp.scopes : [];
    if (scopes.length > 0 && !scopes.includes(appId)) {
      warnings.push(`${id} has ${CONTAINER_ANNOTATION} but is not scoped to app "${appId}": its container is not injected`);
      continue;
    }
    const parsed = parseComponentContainer(raw);
    if (typeof parsed === 'string') {
      errors.push(`${id}: annotation ${CONTAINER_ANNOTATION} ${parsed}`);
      continue;
    }
    const socket = socketOfType(comp.spec?.type);
    const existing = byName.get(parsed.name!);
    if (existing) {
      // several Components served by one container (one socket per API or a shared socket)
      if (socket && !existing.sockets.includes(socket)) existing.sockets.push(socket);
      continue;
    }
    byName.set(parsed.name!, { container: parsed, sockets: socket ? [socket] : [] });
  }
  return { containers: [...byName.values()], warnings, errors };
}

/** The container of a component annotation, or why it is not one. */
export function parseComponentContainer(raw: string): Container | string {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    return `is not valid JSON (${(e as Error).message})`;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'must be a JSON object (a Container)';
  const c = v as Record<string, unknown>;
  if (typeof c.name !== 'string' || !DNS_LABEL.test(c.name)) return 'needs "name": a container name (lower-case letters, digits and "-")';
  if (typeof c.image !== 'string' || c.image.trim() === '') return 'needs "image": the component image';
  for (const k of ['env', 'volumeMounts', 'ports', 'args', 'command'] as const) {
    if (c[k] !== undefined && !Array.isArray(c[k])) return `has "${k}" that is not an array`;
  }
  return c as unknown as Container;
}

/** `state.my-store` is served on `my-store.sock`. */
export function socketOfType(type: string | undefined): string | undefined {
  if (!type) return undefined;
  const dot = type.indexOf('.');
  const name = dot < 0 ? '' : type.slice(dot + 1);
  return name || undefined;
}

/** Gives a component container the socket folder, and in native mode makes it a native sidecar. */
export function prepareComponentContainer(cc: ComponentContainer, folder: string, native: boolean): Container {
  const c = cc.container;
  const mounts = c.volumeMounts ?? [];
  if (!mounts.some((m) => m.name === SOCKETS_VOLUME || m.mountPath === folder)) c.volumeMounts = [...mounts, { name: SOCKETS_VOLUME, mountPath: folder }];
  addEnv(c, [{ name: 'RT_COMPONENTS_SOCKETS_FOLDER', value: folder }]);
  if (native) c.restartPolicy = 'Always';
  return c;
}
