/**
 * The desired state of one app: the Components, Configurations, Subscriptions and HTTPEndpoints of
 * its namespace that are not scoped to other apps, with Kubernetes secretKeyRefs resolved from the
 * namespace's Secrets. Secret values go to the sidecar only; they are never logged.
 */
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import type { ComponentObject, HttpEndpointObject, MetadataEntry, RtResourceObject } from '../../crds/types.ts';
import { checkComponent } from './check.ts';
import { RESOLVED_SECRETS_ANNOTATION, type WireResource, type WireWithheld } from './proto.ts';

export interface SnapshotInputs {
  objects(namespace: string): RtResourceObject[];
  secret(namespace: string, name: string): k8s.V1Secret | undefined;
}

export interface Snapshot {
  resources: WireResource[];
  /** Components not sent, with why: one bad Component never reaches (and never stops) a sidecar. */
  withheld: WireWithheld[];
  /** Equal digests: nothing to send. */
  digest: string;
  /** Objects left out, with why (no secret values in it). */
  problems: string[];
}

export function buildSnapshot(inputs: SnapshotInputs, namespace: string, appId: string): Snapshot {
  const resources: WireResource[] = [];
  const withheld: WireWithheld[] = [];
  const problems: string[] = [];
  const objs = inputs.objects(namespace).filter((o) => !o.scopes || o.scopes.length === 0 || o.scopes.includes(appId));
  objs.sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
  for (const o of objs) {
    if (o.kind === 'Component') {
      // the same check that writes its Ready condition: an invalid Component is not served
      const v = checkComponent(o);
      if (!v.ready) {
        withheld.push({ kind: o.kind, name: o.metadata.name, type: o.spec?.type ?? '', reason: `invalid (${v.reason}): ${v.message}` });
        continue;
      }
    }
    try {
      const out = o.kind === 'Component' ? resolveComponent(o, inputs) : o.kind === 'HTTPEndpoint' ? resolveHeaders(o, inputs) : o;
      const wire = { apiVersion: out.apiVersion, kind: out.kind, metadata: { name: out.metadata.name, namespace, annotations: out.metadata.annotations ?? {} }, scopes: out.scopes, spec: out.spec, auth: (out as ComponentObject).auth };
      resources.push({ kind: o.kind, name: o.metadata.name, json: Buffer.from(JSON.stringify(wire)) });
    } catch (e) {
      problems.push(`${o.kind} ${namespace}/${o.metadata.name}: ${(e as Error).message}`);
      if (o.kind === 'Component') withheld.push({ kind: o.kind, name: o.metadata.name, type: o.spec?.type ?? '', reason: (e as Error).message });
    }
  }
  const h = createHash('sha256');
  for (const r of resources) h.update(r.json).update('\0');
  for (const w of withheld) h.update(JSON.stringify(w)).update('\0');
  return { resources, withheld, digest: h.digest('hex'), problems };
}

function secretValue(inputs: SnapshotInputs, namespace: string, ref: { name: string; key?: string }, where: string): string {
  const secret = inputs.secret(namespace, ref.name);
  if (!secret) throw new Error(`${where}: Secret "${ref.name}" not found in namespace ${namespace}`);
  const key = ref.key || ref.name;
  const b64 = secret.data?.[key];
  const plain = secret.stringData?.[key];
  if (b64 === undefined && plain === undefined) throw new Error(`${where}: Secret "${ref.name}" has no key "${key}"`);
  return plain ?? Buffer.from(b64!, 'base64').toString('utf8');
}

/** Kubernetes secrets are resolved here; refs to another secret store are left for the sidecar. */
function resolveComponent(c: ComponentObject, inputs: SnapshotInputs): ComponentObject {
  const store = c.auth?.secretStore;
  if (store && store !== 'kubernetes') return c;
  const resolved: string[] = [];
  const metadata = (c.spec.metadata ?? []).map((m, i): MetadataEntry => {
    if (!m.secretKeyRef) return m;
    resolved.push(m.name);
    return { name: m.name, value: secretValue(inputs, c.metadata.namespace!, m.secretKeyRef, `spec.metadata[${i}].secretKeyRef`) };
  });
  if (resolved.length === 0) return c;
  const annotations = { ...c.metadata.annotations, [RESOLVED_SECRETS_ANNOTATION]: resolved.join(',') };
  return { ...c, metadata: { ...c.metadata, annotations }, spec: { ...c.spec, metadata }, auth: undefined };
}

function resolveHeaders(e: HttpEndpointObject, inputs: SnapshotInputs): HttpEndpointObject {
  if (!e.spec.headers?.some((h) => h.secretKeyRef)) return e;
  const headers = e.spec.headers.map((h, i) => (h.secretKeyRef ? { name: h.name, value: secretValue(inputs, e.metadata.namespace!, h.secretKeyRef, `spec.headers[${i}].secretKeyRef`) } : h));
  return { ...e, spec: { ...e.spec, headers } };
}
