/**
 * Leader election over a coordination.k8s.io/v1 Lease, as Kubernetes controllers do it: with
 * several operator replicas, only the holder of the Lease writes (Component status, Events, pod
 * deletions, headless Services), so two replicas never race; every replica serves sidecars.
 * The timing is client-go's: every replica tries every `retryMs` (2 s), the holder to renew, the
 * others to acquire; the others take the Lease over when its record has not changed for `leaseMs`
 * (15 s) by their own clock (so clock skew between nodes does not matter), or at once when the
 * holder released it on shutdown. The holder counts itself the leader only while its last renewal
 * is younger than `renewDeadlineMs` (10 s), which is shorter than `leaseMs`, and each Lease request
 * times out well inside that. `isLeader()` is computed from the clock when it is asked, not set
 * by a timer, and the operator asks it right before each write leaves (KubeClient.withFence): a
 * leader that was cut off, or stopped (SIGSTOP) and resumed, sends nothing once another replica
 * could have taken over.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ApiError, type KubeClient } from '../../shared/kube/client.ts';
import { microTime } from '../../shared/kube/times.ts';

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
  /** How long the others wait on an unchanged record before taking over (default 15 s). */
  leaseMs?: number;
  /** How long after its last renewal the holder still writes (default 10 s; less than leaseMs). */
  renewDeadlineMs?: number;
  /** How often every replica tries (default 2 s). */
  retryMs?: number;
  log: Logger;
  /** Called when this replica becomes the leader, and when it stops being it. */
  onChange(leader: boolean): void;
}

/** A MicroTime as the API takes it: RFC 3339 with microseconds. */

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
    this.opts = { name: 'rt-operator', leaseMs: 15_000, renewDeadlineMs: 10_000, retryMs: 2_000, ...opts };
    if (this.opts.renewDeadlineMs >= this.opts.leaseMs) throw new Error(`leader election: renewDeadlineMs (${this.opts.renewDeadlineMs}) must be less than leaseMs (${this.opts.leaseMs})`);
    if (this.opts.retryMs * 2 > this.opts.renewDeadlineMs) throw new Error(`leader election: retryMs (${this.opts.retryMs}) must be at most half of renewDeadlineMs (${this.opts.renewDeadlineMs})`);
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
  }

  /** True only while the last renewal is younger than the renew deadline, by the clock now. */
  isLeader(): boolean {
    return this.leader && performance.now() - this.lastRenew < this.opts.renewDeadlineMs;
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
      const lease = await this.client.request<Lease>('GET', `${this.path}/${this.opts.name}`, { timeoutMs: this.opts.retryMs });
      if (lease.spec.holderIdentity !== this.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime() };
      await this.client.request('PUT', `${this.path}/${this.opts.name}`, { body: lease, timeoutMs: this.opts.retryMs });
    } catch (e) {
      this.opts.log.warn(`releasing the leader Lease failed (another replica takes over when it expires): ${(e as Error).message}`);
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.running = this.attempt().catch((e: Error) => this.opts.log.warn(`leader election: ${e.message}`));
    await this.running;
    if (this.leader && !this.isLeader()) {
      this.opts.log.error(`leader Lease not renewed for ${this.opts.renewDeadlineMs} ms: no longer writing`);
      this.set(false);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.opts.retryMs);
  }

  private async attempt(): Promise<void> {
    const started = performance.now();
    const now = new Date();
    const mine = { holderIdentity: this.identity, leaseDurationSeconds: Math.ceil(this.opts.leaseMs / 1000), renewTime: microTime(now) };
    let lease: Lease;
    try {
      lease = await this.client.request<Lease>('GET', `${this.path}/${this.opts.name}`, { timeoutMs: this.opts.retryMs });
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 404)) throw e;
      const fresh: Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.opts.name, namespace: this.opts.namespace }, spec: { ...mine, acquireTime: microTime(now), leaseTransitions: 0 } };
      if (await this.write(() => this.client.request('POST', this.path, { body: fresh, timeoutMs: this.opts.retryMs }))) this.won(started);
      return;
    }
    const record = JSON.stringify([lease.spec.holderIdentity, lease.spec.renewTime]);
    if (record !== this.observed) {
      this.observed = record;
      this.observedAt = performance.now();
    }
    const holder = lease.spec.holderIdentity ?? '';
    if (holder === this.identity) {
      lease.spec = { ...lease.spec, ...mine };
      if (await this.write(() => this.client.request('PUT', `${this.path}/${this.opts.name}`, { body: lease, timeoutMs: this.opts.retryMs }))) this.won(started);
      return;
    }
    const expired = !holder || performance.now() - this.observedAt > (lease.spec.leaseDurationSeconds ?? 15) * 1000;
    if (this.leader) this.set(false); // someone else holds it now
    if (!expired) return;
    lease.spec = { ...lease.spec, ...mine, acquireTime: microTime(now), leaseTransitions: (lease.spec.leaseTransitions ?? 0) + 1 };
    if (await this.write(() => this.client.request('PUT', `${this.path}/${this.opts.name}`, { body: lease, timeoutMs: this.opts.retryMs }))) this.won(started);
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

  private won(renewStarted: number): void {
    // counted from when the renewal was sent: the API server may have taken it any time after
    this.lastRenew = renewStarted;
    this.set(true);
  }

  private set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    this.opts.log.info({ lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.identity }, leader ? 'became the leader: writing status, Events, deletions and Services' : 'not the leader: serving sidecars only');
    this.opts.onChange(leader);
  }
}
