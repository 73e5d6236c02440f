/**
 * Leader election over a coordination.k8s.io/v1 Lease, as Kubernetes controllers do it: with
 * several operator replicas, only the holder of the Lease writes (Component status, Events, pod
 * deletions, headless Services), so two replicas never race; every replica serves sidecars.
 * The holder renews the Lease every `renewMs`; the others take it over when it has not changed
 * for `leaseMs` by their own clock (so clock skew between nodes does not matter), or at once when
 * the holder released it on shutdown. A holder that cannot renew for `leaseMs` stops writing.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ApiError, type KubeClient } from './kube/client.ts';

interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

export interface LeaderOptions {
  namespace: string;
  name?: string;
  /** This replica (default: POD_NAME or the host name, plus a random suffix). */
  identity?: string;
  leaseMs?: number;
  renewMs?: number;
  retryMs?: number;
  log: Logger;
  /** Called when this replica becomes the leader, and when it stops being it. */
  onChange(leader: boolean): void;
}

/** A MicroTime as the API takes it: RFC 3339 with microseconds. */
const microTime = (d = new Date()) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  readonly identity: string;
  private readonly client: KubeClient;
  private readonly opts: Required<Omit<LeaderOptions, 'identity'>>;
  private readonly path: string;
  private leader = false;
  /** The last Lease record seen, and when (by this replica's clock) it last changed. */
  private observed = '';
  private observedAt = 0;
  private lastRenew = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(client: KubeClient, opts: LeaderOptions) {
    this.client = client;
    this.identity = opts.identity ?? `${process.env.POD_NAME || hostname()}_${randomBytes(4).toString('hex')}`;
    this.opts = { name: 'rt-operator', leaseMs: 15_000, renewMs: 5_000, retryMs: 2_000, ...opts };
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
  }

  isLeader(): boolean {
    return this.leader;
  }

  /** Tries at once, then keeps trying (as a follower) or renewing (as the leader). */
  start(): Promise<void> {
    return this.tick();
  }

  /** Stops; a leader releases the Lease so another replica takes over without waiting for it to expire. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    if (!this.leader) return;
    this.set(false);
    try {
      const lease = await this.client.get<Lease>(`${this.path}/${this.opts.name}`);
      if (lease.spec.holderIdentity !== this.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime() };
      await this.client.replace(`${this.path}/${this.opts.name}`, lease);
    } catch (e) {
      this.opts.log.warn(`releasing the leader Lease failed (another replica takes over when it expires): ${(e as Error).message}`);
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.running = this.attempt().catch((e: Error) => this.opts.log.warn(`leader election: ${e.message}`));
    await this.running;
    if (this.leader && Date.now() - this.lastRenew > this.opts.leaseMs) {
      this.opts.log.error(`leader Lease not renewed for ${this.opts.leaseMs} ms: no longer writing`);
      this.set(false);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.leader ? this.opts.renewMs : this.opts.retryMs);
  }

  private async attempt(): Promise<void> {
    const now = new Date();
    const mine = { holderIdentity: this.identity, leaseDurationSeconds: Math.ceil(this.opts.leaseMs / 1000), renewTime: microTime(now) };
    let lease: Lease;
    try {
      lease = await this.client.get<Lease>(`${this.path}/${this.opts.name}`);
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 404)) throw e;
      const fresh: Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.opts.name, namespace: this.opts.namespace }, spec: { ...mine, acquireTime: microTime(now), leaseTransitions: 0 } };
      if (await this.write(() => this.client.create(this.path, fresh))) this.won();
      return;
    }
    const record = JSON.stringify([lease.spec.holderIdentity, lease.spec.renewTime]);
    if (record !== this.observed) {
      this.observed = record;
      this.observedAt = Date.now();
    }
    const holder = lease.spec.holderIdentity ?? '';
    if (holder === this.identity) {
      lease.spec = { ...lease.spec, ...mine };
      if (await this.write(() => this.client.replace(`${this.path}/${this.opts.name}`, lease))) this.won();
      return;
    }
    const expired = !holder || Date.now() - this.observedAt > (lease.spec.leaseDurationSeconds ?? 15) * 1000;
    if (this.leader) this.set(false); // someone else holds it now
    if (!expired) return;
    lease.spec = { ...lease.spec, ...mine, acquireTime: microTime(now), leaseTransitions: (lease.spec.leaseTransitions ?? 0) + 1 };
    if (await this.write(() => this.client.replace(`${this.path}/${this.opts.name}`, lease))) this.won();
  }

  /** A write that another replica beat us to (409) is no error: it just did not win. */
  private async write(fn: () => Promise<unknown>): Promise<boolean> {
    try {
      await fn();
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.code === 409) return false;
      throw e;
    }
  }

  private won(): void {
    this.lastRenew = Date.now();
    this.set(true);
  }

  private set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.opts.log.info({ lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.identity }, leader ? 'became the leader: writing status, Events, deletions and Services' : 'not the leader: serving sidecars only');
    this.opts.onChange(leader);
  }
}
