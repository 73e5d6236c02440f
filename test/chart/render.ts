/**
 * Renders the chart with the real helm and checks every object against the Kubernetes schema
 * (kubernetes-models, the same OpenAPI the API server validates with).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ensureKubectlAndHelm } from '../services/kube.ts';

export const ROOT = join(import.meta.dirname, '..', '..');
export const CHART = join(ROOT, 'charts', 'rt');
/** The project's cluster (`npm run cluster`, pod network): only the image and the scheduler's storage differ from the defaults. */
export const LOCAL_VALUES = join(ROOT, 'e2e', 'values-local.yaml');
/** A node without a pod network (`npm run cluster -- --host-network`): everything on the host's loopback. */
export const HOSTNETWORK_VALUES = join(ROOT, 'e2e', 'values-hostnetwork.yaml');

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export async function helm(args: string[]): Promise<Run> {
  const { helm: bin } = await ensureKubectlAndHelm();
  return new Promise((resolve) => {
    execFile(bin, args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** `helm template` with value files and --set pairs; throws with helm's message when it fails. */
export async function template(opts: { values?: string[]; set?: string[]; namespace?: string } = {}): Promise<K8sObject[]> {
  const args = ['template', 'rt', CHART, '--namespace', opts.namespace ?? 'rt-system'];
  for (const f of opts.values ?? []) args.push('-f', f);
  for (const s of opts.set ?? []) args.push('--set', s);
  const r = await helm(args);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

type Models = Record<string, (new (data: unknown) => { validate(): void }) | undefined>;
/** The API groups the chart renders, each with its models. */
const MODELS: Record<string, () => Promise<unknown>> = {
  v1: () => import('kubernetes-models/v1'),
  'apps/v1': () => import('kubernetes-models/apps/v1'),
  'rbac.authorization.k8s.io/v1': () => import('kubernetes-models/rbac.authorization.k8s.io/v1'),
  'admissionregistration.k8s.io/v1': () => import('kubernetes-models/admissionregistration.k8s.io/v1'),
  'apiextensions.k8s.io/v1': () => import('kubernetes-models/apiextensions.k8s.io/v1'),
  'policy/v1': () => import('kubernetes-models/policy/v1'),
};

export async function validateObject(o: K8sObject): Promise<void> {
  const load = MODELS[o.apiVersion];
  const Model = load ? ((await load()) as Models)[o.kind] : undefined;
  if (!Model) throw new Error(`no kubernetes-models class for ${o.apiVersion} ${o.kind}`);
  new Model(o).validate();
}

export function find<T = K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in ${objects.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`);
  return o as T;
}
