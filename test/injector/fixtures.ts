/**
 * Shared pieces of the injector suites: pods and Components to admit, an AdmissionReview maker,
 * and `admit()`, which applies the returned JSONPatch with a JSON-patch library and validates
 * the resulting Pod against the Kubernetes schema (kubernetes-models), as the API server would.
 */
import fastJsonPatch from 'fast-json-patch';
import { Pod as PodModel } from 'kubernetes-models/v1';
import { StaticComponents, type ComponentObject } from '../../injector/src/components.ts';
import { mutatePod, type InjectorSettings } from '../../injector/src/mutate.ts';
import type { Container, Pod } from '../../injector/src/pod.ts';

export const SETTINGS: InjectorSettings = {
  sidecarImage: 'rt:test',
  controlPlaneAddress: 'rt-operator.rt-system.svc:6500',
  nativeSidecar: true,
};

export function pod(annotations: Record<string, string> = {}, extra: { containers?: Container[]; initContainers?: Container[]; generateName?: string; name?: string; labels?: Record<string, string> } = {}): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...(extra.name !== undefined ? { name: extra.name } : {}),
      generateName: extra.generateName ?? 'web-',
      namespace: 'ns1',
      annotations: { 'rt.io/enabled': 'true', ...annotations },
      ...(extra.labels ? { labels: extra.labels } : {}),
    },
    spec: {
      containers: extra.containers ?? [{ name: 'app', image: 'app:1', ports: [{ containerPort: 8080 }] }],
      ...(extra.initContainers ? { initContainers: extra.initContainers } : {}),
    },
  };
}

export function component(name: string, o: { type?: string; scopes?: string[]; container?: unknown; namespace?: string } = {}): ComponentObject {
  const annotations: Record<string, string> = {};
  if (o.container !== undefined) annotations['rt.io/component-container'] = typeof o.container === 'string' ? o.container : JSON.stringify(o.container);
  return {
    apiVersion: 'rt.io/v1alpha1',
    kind: 'Component',
    metadata: { name, namespace: o.namespace ?? 'ns1', annotations },
    spec: { type: o.type ?? `state.${name}` },
    ...(o.scopes ? { scopes: o.scopes } : {}),
  };
}

export interface Admitted {
  allowed: boolean;
  message?: string;
  warnings: string[];
  /** The pod after the patch (the original when denied or unchanged). */
  pod: Pod;
  patchLength: number;
}

/** Admits a pod through mutatePod, applies the patch and validates the result. */
export function admit(p: unknown, o: { components?: ComponentObject[]; settings?: Partial<InjectorSettings>; namespace?: string } = {}): Admitted {
  const result = mutatePod(p, o.namespace ?? 'ns1', { ...SETTINGS, ...o.settings }, new StaticComponents(o.components ?? []));
  if (!result.allowed) return { allowed: false, message: result.message, warnings: result.warnings, pod: p as Pod, patchLength: 0 };
  const doc = structuredClone(p) as Pod;
  // validateOperation=true: every operation must be well-formed against the document
  const patched = fastJsonPatch.applyPatch(doc, result.patch, true, false).newDocument;
  new PodModel(patched as never).validate();
  return { allowed: true, warnings: result.warnings, pod: patched, patchLength: result.patch.length };
}

export function sidecarOf(p: Pod): Container {
  const c = [...(p.spec.initContainers ?? []), ...p.spec.containers].find((x) => x.name === 'rt-sidecar');
  if (!c) throw new Error('no rt-sidecar container');
  return c;
}

/** The value of `--flag` in the sidecar's args (undefined when absent; '' for a bare switch). */
export function arg(c: Container, flag: string): string | undefined {
  const args = c.args ?? [];
  const i = args.indexOf(`--${flag}`);
  if (i < 0) return undefined;
  const next = args[i + 1];
  return next === undefined || next.startsWith('--') ? '' : next;
}

export function envOf(c: Container, name: string) {
  return c.env?.find((e) => e.name === name);
}
