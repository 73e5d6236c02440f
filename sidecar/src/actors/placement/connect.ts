/**
 * The placement client of a sidecar started with `--placement-host-address`. It is made once what
 * it needs is there: the internal port's bound port (the address other sidecars reach this one
 * at, which placement hands out as this host's name) and the gRPC client code, loaded by import()
 * so that a sidecar without a placement address never loads it (its start does not change).
 * Until then lookups are held (`locked`, ready() waits), as a RemotePlacement holds them until
 * its first table: starting never waits for placement.
 */
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { Logger } from 'pino';
import type { IdentityManager } from '../../identity/manager.ts';
import type { ActorHost, ActorPlacement } from './types.ts';

export interface PlacementConnection {
  addresses: string[];
  appId: string;
  namespace: string;
  mode: 'standalone' | 'kubernetes';
  /** --listen-address: the internal port listens there too. */
  listenAddress: string;
  /** The internal port, once it listens (with mTLS after the first certificate). */
  port: Promise<{ port: number }>;
  log: Logger;
  /** mTLS: the workload certificate is the client certificate toward placement. */
  identity?: IdentityManager;
  env?: NodeJS.ProcessEnv;
}

/**
 * The IP other sidecars reach this one at: the pod's IP when the environment gives it
 * (`RT_HOST_IP`, `DAPR_HOST_IP` or `POD_IP`, set from the Downward API's status.podIP), else the
 * listen address when it is one, else on a cluster the first external IPv4 of this host (a pod's
 * own interface), else loopback (standalone sidecars share one machine).
 */
export function advertisedIp(env: NodeJS.ProcessEnv, listenAddress: string, mode: 'standalone' | 'kubernetes'): string {
  const given = env.RT_HOST_IP || env.DAPR_HOST_IP || env.POD_IP;
  if (given) return given;
  if (listenAddress && listenAddress !== '0.0.0.0' && listenAddress !== '::') return listenAddress;
  if (mode === 'kubernetes') {
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

export function hostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** Reads the CA now: a file that cannot be read stops the sidecar, naming it. */
function placementCa(env: NodeJS.ProcessEnv): Buffer | undefined {
  const file = env.RT_PLACEMENT_TLS_CA_FILE;
  return file ? readFileSync(file) : undefined;
}

export function connectPlacement(c: PlacementConnection): PendingPlacement {
  const env = c.env ?? process.env;
  const tlsCa = placementCa(env);
  return new PendingPlacement(async () => {
    const [{ createRemotePlacement }, tls, { port }] = await Promise.all([import('./remote.ts'), c.identity ? import('../../identity/tls.ts') : undefined, c.port]);
    const hostAddress = hostPort(advertisedIp(env, c.listenAddress, c.mode), port);
    // mTLS: our workload certificate; placement is checked with its CA file when given, else as a workload of our trust domain
    const credentials = c.identity && tls ? tls.grpcClientCredentials(c.identity, { caPem: tlsCa }) : undefined;
    c.log.info({ placement: c.addresses, hostAddress }, `actors: placement at ${c.addresses.join(', ')}; other sidecars reach this one's actors at ${hostAddress}`);
    return createRemotePlacement({ addresses: c.addresses, appId: c.appId, namespace: c.namespace, pod: env.POD_NAME, hostAddress, log: c.log, credentials, tlsCa });
  }, c.log);
}

/** An ActorPlacement that holds lookups until the real one is made. */
export class PendingPlacement implements ActorPlacement {
  private inner?: ActorPlacement;
  private types?: string[];
  private closed = false;
  private failed?: Error;
  private readonly made: Promise<ActorPlacement | undefined>;
  private readonly listeners = new Set<() => void>();
  private readonly tableListeners = new Set<() => Promise<void>>();

  constructor(make: () => Promise<ActorPlacement>, log: Logger) {
    this.made = make().then(
      (p) => {
        if (this.closed) {
          void p.close();
          return undefined;
        }
        this.inner = p;
        if (this.types) p.setHostedTypes(this.types);
        p.onChange(() => {
          for (const l of [...this.listeners]) l();
        });
        p.onTable?.(() => Promise.all([...this.tableListeners].map((l) => l())).then(() => undefined));
        return p;
      },
      (e: unknown) => {
        this.failed = e as Error;
        log.error({ err: (e as Error).message }, 'actors: the placement client could not start; actor calls answer with an error');
        return undefined;
      },
    );
  }

  get locked(): boolean {
    return this.inner ? this.inner.locked : true;
  }

  setHostedTypes(types: string[]): void {
    this.types = types;
    this.inner?.setHostedTypes(types);
  }

  lookup(actorType: string, actorId: string): ActorHost | undefined {
    return this.inner?.lookup(actorType, actorId);
  }

  async ready(signal?: AbortSignal): Promise<void> {
    if (this.inner) return this.inner.ready(signal);
    signal?.throwIfAborted();
    const p = await new Promise<ActorPlacement | undefined>((resolve, reject) => {
      const onAbort = () => reject(signal!.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      void this.made.then((v) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(v);
      });
    });
    if (!p) throw new Error(this.failed ? `the placement client could not start: ${this.failed.message}` : 'placement client closed');
    return p.ready(signal);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onTable(listener: () => Promise<void>): () => void {
    this.tableListeners.add(listener);
    return () => this.tableListeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.tableListeners.clear();
    await this.inner?.close();
  }
}
