/**
 * Secrets, only as far as Components and HTTPEndpoints reference them. The operator watches every
 * Secret's metadata only (PartialObjectMetadata: no values), which tells it when one changes, and
 * reads and keeps the values of just the Secrets its resources reference (a GET each, again when
 * the watch says it changed). Memory then grows with the referenced Secrets, not with every
 * Secret of the cluster, and values the operator never needs never reach it.
 */
import type * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { RtResourceObject } from '../../crds/types.ts';
import { ApiError, type KubeClient } from '../../shared/kube/client.ts';
import { Watched, type KubeObject } from '../../shared/kube/watched.ts';

type SecretValues = Pick<k8s.V1Secret, 'data' | 'stringData'> & { metadata: { name: string; namespace: string; resourceVersion?: string } };

/** The Kubernetes Secrets a namespace's resources resolve: secretKeyRefs of Components (kubernetes store) and HTTPEndpoint headers. */
export function referencedSecrets(objects: RtResourceObject[]): Set<string> {
  const names = new Set<string>();
  for (const o of objects) {
    if (o.kind === 'Component') {
      const store = o.auth?.secretStore;
      if (store && store !== 'kubernetes') continue;
      for (const m of o.spec.metadata ?? []) if (m.secretKeyRef?.name) names.add(m.secretKeyRef.name);
    } else if (o.kind === 'HTTPEndpoint') {
      for (const h of o.spec.headers ?? []) if (h.secretKeyRef?.name) names.add(h.secretKeyRef.name);
    }
  }
  return names;
}

export class ReferencedSecrets {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly onChange: (namespace: string) => void;
  /** Metadata of every Secret: existence and resourceVersion, no values. */
  readonly watched: Watched<KubeObject>;
  /** Values of referenced Secrets only: namespace → name → Secret (undefined: it does not exist). */
  private readonly values = new Map<string, Map<string, SecretValues | undefined>>();

  constructor(client: KubeClient, log: Logger, onChange: (namespace: string) => void) {
    this.client = client;
    this.log = log;
    this.onChange = onChange;
    this.watched = new Watched(client, 'secrets (metadata)', '/api/v1/secrets', log, (_type, s) => this.changed(s.metadata?.namespace, s.metadata?.name), { metadataOnly: true });
  }

  /** The values of a Secret `want()` made sure of, or undefined when it does not exist. */
  get(namespace: string, name: string): k8s.V1Secret | undefined {
    return this.values.get(namespace)?.get(name) as k8s.V1Secret | undefined;
  }

  /**
   * Makes sure the values of exactly these Secrets of a namespace are held: reads the ones not
   * held yet, and lets go of the ones no longer referenced.
   */
  async want(namespace: string, names: Set<string>): Promise<void> {
    let held = this.values.get(namespace);
    if (!held) this.values.set(namespace, (held = new Map()));
    for (const name of [...held.keys()]) if (!names.has(name)) held.delete(name);
    if (held.size === 0 && names.size === 0) this.values.delete(namespace);
    await Promise.all([...names].filter((n) => !held.has(n)).map((n) => this.read(namespace, n)));
  }

  private async read(namespace: string, name: string): Promise<void> {
    let value: SecretValues | undefined;
    try {
      const s = await this.client.get<k8s.V1Secret>(`/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`);
      value = { metadata: { name, namespace, resourceVersion: s.metadata?.resourceVersion }, data: s.data, stringData: s.stringData };
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 404)) {
        this.log.warn({ secret: `${namespace}/${name}` }, `reading a referenced Secret failed: ${(e as Error).message}`);
        return; // not held: the next want() tries again
      }
    }
    // still referenced? (want() for another set may have run meanwhile)
    this.values.get(namespace)?.set(name, value);
  }

  /** The watch saw a Secret change: a referenced one is read again, and its namespace's sidecars get it. */
  private changed(namespace: string | undefined, name: string | undefined): void {
    if (!namespace || !name) return;
    const held = this.values.get(namespace);
    if (!held?.has(name)) return;
    // the snapshot's digest tells the sidecars whether anything they get changed
    void this.read(namespace, name).then(() => this.onChange(namespace));
  }
}
