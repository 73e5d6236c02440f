/**
 * The parts of a Pod the injector reads and writes, and a shape check that turns a pod the API
 * server would never send (but a caller might) into a clear denial instead of a crash.
 */
import type { V1Container, V1EnvVar, V1Pod, V1Volume } from '@kubernetes/client-node';

export type Pod = V1Pod & { spec: NonNullable<V1Pod['spec']> };
export type Container = V1Container;
export type EnvVar = V1EnvVar;
export type Volume = V1Volume;

/** The name of the injected runtime container. */
export const SIDECAR_NAME = 'rt-sidecar';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why `value` is not a pod the injector can edit, or undefined when it is. */
export function podShapeError(value: unknown): string | undefined {
  if (!isObject(value)) return 'the object is not a JSON object';
  const md = value.metadata;
  if (md !== undefined) {
    if (!isObject(md)) return 'metadata must be an object';
    for (const k of ['annotations', 'labels'] as const) {
      const m = md[k];
      if (m === undefined || m === null) continue;
      if (!isObject(m)) return `metadata.${k} must be an object`;
      for (const [key, v] of Object.entries(m)) if (typeof v !== 'string') return `metadata.${k}["${key}"] must be a string`;
    }
    for (const k of ['name', 'generateName', 'namespace'] as const) {
      if (md[k] !== undefined && md[k] !== null && typeof md[k] !== 'string') return `metadata.${k} must be a string`;
    }
  }
  const spec = value.spec;
  if (!isObject(spec)) return 'spec must be an object';
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) return 'spec.containers must be a non-empty array';
  for (const list of ['containers', 'initContainers'] as const) {
    const cs = spec[list];
    if (cs === undefined || cs === null) continue;
    if (!Array.isArray(cs)) return `spec.${list} must be an array`;
    for (const [i, c] of cs.entries()) {
      const where = `spec.${list}[${i}]`;
      if (!isObject(c)) return `${where} must be an object`;
      if (typeof c.name !== 'string') return `${where}.name must be a string`;
      for (const k of ['env', 'volumeMounts', 'ports'] as const) {
        const a = c[k];
        if (a === undefined || a === null) continue;
        if (!Array.isArray(a) || !a.every(isObject)) return `${where}.${k} must be an array of objects`;
      }
      if (Array.isArray(c.env) && !c.env.every((e) => typeof (e as Record<string, unknown>).name === 'string')) return `${where}.env entries need a string name`;
    }
  }
  const vols = spec.volumes;
  if (vols !== undefined && vols !== null) {
    if (!Array.isArray(vols) || !vols.every((v) => isObject(v) && typeof v.name === 'string')) return 'spec.volumes must be an array of objects with a name';
  }
  return undefined;
}

/** True when the runtime container is already there (reinvocation, or injected by hand). */
export function alreadyInjected(pod: Pod): boolean {
  return [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].some((c) => c.name === SIDECAR_NAME);
}

/**
 * App id when the pod names none: its generate-name prefix without the trailing "-" (and
 * without the ReplicaSet's pod-template-hash, so a Deployment's pods get the Deployment's name),
 * else the pod's name.
 */
export function defaultAppId(pod: Pod): string | undefined {
  const md = pod.metadata ?? {};
  if (md.generateName) {
    let p = md.generateName.replace(/-+$/, '');
    const hash = md.labels?.['pod-template-hash'];
    if (hash && p.endsWith(`-${hash}`)) p = p.slice(0, -(hash.length + 1));
    if (p) return p;
  }
  return md.name || undefined;
}

/** Adds env vars the container does not set yet. */
export function addEnv(c: Container, vars: EnvVar[]): void {
  const have = new Set((c.env ?? []).map((e) => e.name));
  const add = vars.filter((v) => !have.has(v.name));
  if (add.length) c.env = [...(c.env ?? []), ...add];
}
