/**
 * Name resolution: where an app id's sidecar takes internal calls. Standalone reads the local
 * registry (registry/local.ts); on Kubernetes the operator's headless Service `<app-id>-rt`
 * gives one DNS record per ready pod, and calls rotate over them.
 */
import { promises as dns } from 'node:dns';
import type { LocalRegistry } from './registry/local.ts';
import type { AppTarget } from './target.ts';

export const INTERNAL_GRPC_PORT = 50002;

export class ResolveError extends Error {}

export interface Resolver {
  /** host:port of one sidecar of the app; throws ResolveError saying what was tried. */
  resolve(t: AppTarget): Promise<string>;
  /** An address did not answer: look again next time. */
  failed(t: AppTarget): void;
}

export class LocalResolver implements Resolver {
  private turn = 0;
  private readonly registry: LocalRegistry;
  constructor(registry: LocalRegistry) {
    this.registry = registry;
  }

  async resolve(t: AppTarget): Promise<string> {
    const all = this.registry.entries();
    const hits = all.filter((e) => e.appId === t.appId && (e.namespace ?? 'default') === t.namespace);
    if (hits.length === 0) {
      const known = [...new Set(all.map((e) => (e.namespace && e.namespace !== t.namespace ? `${e.appId}.${e.namespace}` : e.appId)))];
      throw new ResolveError(
        `no running app "${t.appId}" in namespace "${t.namespace}" in the local registry ${this.registry.dir}; ` +
          (known.length ? `running apps: ${known.join(', ')}` : 'no apps are running (start one with rt run --app-id …)'),
      );
    }
    const e = hits[this.turn++ % hits.length];
    return `${e.host}:${e.internalGrpcPort}`;
  }

  failed(): void {
    this.registry.invalidate();
  }
}

/** Cluster DNS: `<app-id>-rt.<namespace>.svc.<clusterDomain>`, records kept for a few seconds. */
export class DnsResolver implements Resolver {
  private readonly cache = new Map<string, { addrs: string[]; until: number }>();
  private turn = 0;
  private readonly clusterDomain: string;
  private readonly port: number;
  private readonly ttlMs: number;
  constructor(clusterDomain = process.env.RT_CLUSTER_DOMAIN || 'cluster.local', port = INTERNAL_GRPC_PORT, ttlMs = 5000) {
    this.clusterDomain = clusterDomain;
    this.port = port;
    this.ttlMs = ttlMs;
  }

  async resolve(t: AppTarget): Promise<string> {
    const name = `${t.appId}-rt.${t.namespace}.svc.${this.clusterDomain}`;
    let hit = this.cache.get(name);
    if (!hit || hit.until < Date.now()) {
      let addrs: string[];
      try {
        addrs = await dns.resolve4(name);
      } catch (e) {
        throw new ResolveError(`could not resolve ${name} through cluster DNS (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): is a pod of "${t.appId}" running with rt.io/enabled, and does the operator keep its Service?`);
      }
      hit = { addrs, until: Date.now() + this.ttlMs };
      this.cache.set(name, hit);
    }
    return `${hit.addrs[this.turn++ % hit.addrs.length]}:${this.port}`;
  }

  failed(t: AppTarget): void {
    this.cache.delete(`${t.appId}-rt.${t.namespace}.svc.${this.clusterDomain}`);
  }
}
