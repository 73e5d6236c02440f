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
  /** host:port (or unix:<path>) of one sidecar of the app; throws ResolveError saying what was tried. */
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
    // the Unix socket when the sidecar has one: both are on this machine
    return e.internalSocket ? `unix:${e.internalSocket}` : `${e.host}:${e.internalGrpcPort}`;
  }

  failed(): void {
    this.registry.invalidate();
  }
}

/** The DNS lookups DnsResolver makes: node's resolver (the system's servers), or one pointed elsewhere. */
export interface DnsLookup {
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
}

/**
 * Cluster DNS: the operator's headless Service `<app-id>-rt` in the target's namespace, as
 * `<app-id>-rt.<namespace>.svc.<clusterDomain>` (RT_CLUSTER_DOMAIN, default cluster.local). A
 * headless Service has one A (or AAAA) record per ready pod; calls rotate over them, the records
 * are kept ttlMs, and an address that did not answer makes the next call look them up again.
 */
export class DnsResolver implements Resolver {
  private readonly cache = new Map<string, { addrs: string[]; until: number }>();
  private turn = 0;
  private readonly clusterDomain: string;
  private readonly port: number;
  private readonly ttlMs: number;
  private readonly dns: DnsLookup;
  constructor(o: { clusterDomain?: string; port?: number; ttlMs?: number; dns?: DnsLookup } = {}) {
    this.clusterDomain = o.clusterDomain ?? (process.env.RT_CLUSTER_DOMAIN || 'cluster.local');
    this.port = o.port ?? INTERNAL_GRPC_PORT;
    this.ttlMs = o.ttlMs ?? 5000;
    this.dns = o.dns ?? new dns.Resolver();
  }

  /** The name a target's sidecars are found under. */
  nameOf(t: AppTarget): string {
    return `${t.appId}-rt.${t.namespace}.svc.${this.clusterDomain}`;
  }

  async resolve(t: AppTarget): Promise<string> {
    const name = this.nameOf(t);
    // the operator names a Service only with a DNS-1035 label (operator/src/services.ts)
    if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(`${t.appId}-rt`)) throw new ResolveError(`app id "${t.appId}" cannot name a Kubernetes Service (${t.appId}-rt must be lowercase letters, digits and '-', at most 63): it cannot be called on a cluster`);
    let hit = this.cache.get(name);
    if (!hit || hit.until < Date.now()) {
      let addrs: string[];
      try {
        addrs = await this.dns.resolve4(name).catch(async (e: NodeJS.ErrnoException) => {
          // an IPv6-only cluster has AAAA records only
          if (e.code === 'ENODATA') return (await this.dns.resolve6(name)).map((a) => `[${a}]`);
          throw e;
        });
      } catch (e) {
        throw new ResolveError(`could not resolve ${name} through cluster DNS (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): is a pod of "${t.appId}" running with rt.io/enabled, and does the operator keep its Service?`);
      }
      if (addrs.length === 0) throw new ResolveError(`${name} has no addresses: no pod of "${t.appId}" is ready`);
      hit = { addrs, until: Date.now() + this.ttlMs };
      this.cache.set(name, hit);
    }
    return `${hit.addrs[this.turn++ % hit.addrs.length]}:${this.port}`;
  }

  failed(t: AppTarget): void {
    this.cache.delete(this.nameOf(t));
  }
}
