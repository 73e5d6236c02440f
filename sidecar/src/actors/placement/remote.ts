/**
 * The sidecar's placement client (`--placement-host-address`): one ReportDaprStatus stream to
 * the leading placement replica, on which this sidecar reports itself (its app id, the actor
 * types it hosts, the internal invocation address other sidecars reach it at) every second, and
 * applies the orders it gets: `lock` holds lookups (ready() waits), `update` brings the new
 * table, `unlock` lets lookups go by it. Each order is acknowledged once applied; the service
 * moves on only when every host has (placement/src/service.ts).
 *
 * Lost stream: this sidecar locks itself until a new table comes, because the service drops a
 * host whose stream ends and moves its actors; routing by the old table meanwhile could reach an
 * actor that is already active elsewhere. It then tries the next address (a follower refuses,
 * FAILED_PRECONDITION) with backoff.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { Backoff } from '../../../../shared/backoff.ts';
import { systemClock, type Clock, type Timer } from '../../../../shared/clock.ts';
import { PlacementRings, placementService, type PbHost, type PbOrder, type RingHost } from '../../../../placement/src/index.ts';
import type { ActorHost, ActorPlacement } from './types.ts';

export interface RemotePlacementOptions {
  /** Placement replicas, host:port each; the leader takes the stream. */
  addresses: string[];
  appId: string;
  namespace?: string;
  pod?: string;
  /** host:port at which other sidecars reach this one's internal invocation server. */
  hostAddress: string;
  log: Logger;
  /** The channel's credentials (mutual TLS: the sidecar's workload certificate). */
  credentials?: grpc.ChannelCredentials;
  /** PEM CA of the placement service's certificate, for server-side TLS. */
  tlsCa?: Buffer;
  /** The actor types hosted from the start (setHostedTypes changes them). */
  hostedTypes?: string[];
  /** Heartbeat interval (default 1000 ms). */
  heartbeatMs?: number;
  clock?: Clock;
}

/** Waits between attempts to reopen the stream: 100 ms doubling to 1 s, ±20%. */
const STREAM_BACKOFF = { initialMs: 100, maxMs: 1000, jitter: 0.2 };
/**
 * How long a new table's acknowledgement waits for the onTable listeners (the runtime ending the
 * actors that moved away): placement drops a host that does not acknowledge within 2 s.
 */
const TABLE_HOLD_MS = 1000;

type Stream = grpc.ClientDuplexStream<PbHost, PbOrder>;

export class RemotePlacement implements ActorPlacement {
  private readonly opts: RemotePlacementOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly clients: grpc.Client[];
  private readonly backoff = new Backoff(STREAM_BACKOFF);
  private entities: string[] = [];
  private rings?: PlacementRings;
  private tableVersion = '';
  private updated = false;
  private isLocked = true;
  private next = 0;
  private stream?: Stream;
  private heartbeat?: Timer;
  private retry?: Timer;
  private closed = false;
  private saidUnreachable = false;
  private readonly waiters = new Set<() => void>();
  private readonly listeners = new Set<() => void>();
  private readonly tableListeners = new Set<() => Promise<void>>();
  /** Orders not yet applied while an update waits for its listeners (applied in order). */
  private queued = 0;
  private applying: Promise<void> = Promise.resolve();

  constructor(opts: RemotePlacementOptions) {
    if (opts.addresses.length === 0) throw new Error('placement: no address (--placement-host-address)');
    this.opts = opts;
    this.log = opts.log;
    this.entities = [...new Set(opts.hostedTypes ?? [])].sort();
    this.clock = opts.clock ?? systemClock();
    const Ctor = placementService();
    const credentials = opts.credentials ?? (opts.tlsCa ? grpc.credentials.createSsl(opts.tlsCa) : grpc.credentials.createInsecure());
    this.clients = opts.addresses.map(
      (a) =>
        new Ctor(a, credentials, {
          'grpc.keepalive_time_ms': 10_000,
          'grpc.keepalive_timeout_ms': 5_000,
          'grpc.keepalive_permit_without_calls': 1,
          'grpc.initial_reconnect_backoff_ms': 200,
          'grpc.max_reconnect_backoff_ms': 1000,
        }),
    );
    this.open();
  }

  /** The version of the table lookups answer by ('' before the first). */
  get version(): string {
    return this.tableVersion;
  }

  /** True while lookups are held (before the first table, during an update, while disconnected). */
  get locked(): boolean {
    return this.isLocked;
  }

  setHostedTypes(types: string[]): void {
    this.entities = [...new Set(types)].sort();
    this.send();
  }

  lookup(actorType: string, actorId: string): ActorHost | undefined {
    const h: RingHost | undefined = this.rings?.lookup(actorType, actorId);
    return h && { appId: h.id, address: h.name, local: h.name === this.opts.hostAddress };
  }

  ready(signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.reject(new Error('placement client closed'));
    if (!this.isLocked) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        if (this.closed) reject(new Error('placement client closed'));
        else resolve();
      };
      const onAbort = () => {
        this.waiters.delete(done);
        reject(signal!.reason);
      };
      this.waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
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
    if (this.closed) return;
    this.closed = true;
    this.heartbeat?.cancel();
    this.retry?.cancel();
    // a graceful end: the service removes this host at once rather than after the heartbeat timeout
    this.stream?.end();
    this.stream = undefined;
    this.wake();
    await new Promise((r) => setImmediate(r));
    for (const c of this.clients) c.close();
  }

  private report(ack?: { operation: string; version: string }): PbHost {
    const { hostAddress, appId, namespace, pod } = this.opts;
    const port = Number(hostAddress.slice(hostAddress.lastIndexOf(':') + 1)) || 0;
    return { name: hostAddress, port, id: appId, namespace: namespace ?? '', pod: pod ?? '', entities: this.entities, ackOperation: ack?.operation, ackVersion: ack?.version };
  }

  private send(ack?: { operation: string; version: string }): void {
    this.stream?.write(this.report(ack));
  }

  private open(): void {
    if (this.closed) return;
    const i = this.next++ % this.clients.length;
    const address = this.opts.addresses[i]!;
    const client = this.clients[i]! as grpc.Client & { ReportDaprStatus(): Stream };
    const stream = client.ReportDaprStatus();
    this.stream = stream;
    let dead = false;
    let heard = false;
    stream.on('data', (o: PbOrder) => {
      if (!heard) {
        heard = true;
        this.backoff.reset();
        this.saidUnreachable = false;
        this.log.info({ placement: address }, 'connected to placement');
      }
      this.deliver(o);
    });
    const down = (why: string, e?: grpc.ServiceError) => {
      if (dead) return;
      dead = true;
      if (this.stream === stream) this.stream = undefined;
      this.heartbeat?.cancel();
      if (this.closed) return;
      // hold calls: the service has dropped this host and may be moving its actors
      this.isLocked = true;
      const follower = e?.code === grpc.status.FAILED_PRECONDITION;
      if (heard) this.log.warn({ placement: address, why }, 'lost the placement stream; actor calls wait until it is back');
      else if (!follower && !this.saidUnreachable) {
        this.saidUnreachable = true;
        this.log.warn({ placement: address, why }, `placement at ${address} does not answer; actor calls wait until one does (retrying). Check --placement-host-address, or start one with: rt placement`);
      }
      // a follower sends us on to the next replica at once; otherwise back off
      const delay = follower && this.next % this.clients.length !== 0 ? 0 : this.backoff.next();
      this.retry = this.clock.after(delay, () => this.open());
    };
    stream.on('error', (e: grpc.ServiceError) => down(e.details || e.message, e));
    stream.on('end', () => down('stream ended'));
    stream.on('close', () => down('stream closed'));
    this.send();
    this.heartbeat = this.clock.every(this.opts.heartbeatMs ?? 1000, () => this.send());
  }

  /** Applies an order, after the ones still waiting: synchronously when none is. */
  private deliver(o: PbOrder): void {
    if (this.queued === 0) {
      const waiting = this.apply(o);
      if (!waiting) return;
      this.queued++;
      this.applying = waiting.finally(() => this.queued--);
      return;
    }
    this.queued++;
    this.applying = this.applying.then(() => this.apply(o)).finally(() => this.queued--);
  }

  private apply(o: PbOrder): Promise<void> | undefined {
    const version = o.tables?.version ?? '';
    switch (o.operation) {
      case 'lock':
        this.isLocked = true;
        break;
      case 'update': {
        const entries: Record<string, RingHost[]> = {};
        for (const [type, t] of Object.entries(o.tables?.entries ?? {})) entries[type] = (t.hosts ?? []).map((h) => ({ name: h.name ?? '', id: h.id ?? '', pod: h.pod ?? '' }));
        this.rings = new PlacementRings(entries, Number(o.tables?.replicationFactor) || undefined);
        this.updated = this.tableVersion !== version || this.updated;
        this.tableVersion = version;
        if (this.tableListeners.size > 0) return this.holdAck({ operation: o.operation, version });
        break;
      }
      case 'unlock':
        if (!this.rings || version !== this.tableVersion) break; // an unlock of a table we never got: stay locked
        this.isLocked = false;
        if (this.updated) {
          this.updated = false;
          for (const l of [...this.listeners]) {
            try {
              l();
            } catch (e) {
              this.log.error({ err: (e as Error).message }, 'placement: a table-change listener threw');
            }
          }
        }
        this.wake();
        break;
      default:
        this.log.warn({ operation: o.operation }, 'placement: unknown order ignored');
        return;
    }
    this.send({ operation: o.operation, version });
  }

  /**
   * Lookups are held (the lock came first) and answer by the new table: the listeners end the
   * actors that moved away before this host acknowledges it, so no host routes a call to them
   * by the new table while they are still active here. A listener slower than TABLE_HOLD_MS (a
   * call in flight being drained) goes on after the acknowledgement.
   */
  private async holdAck(ack: { operation: string; version: string }): Promise<void> {
    let timer: Timer | undefined;
    const settled = Promise.allSettled([...this.tableListeners].map((l) => l()));
    await Promise.race([settled, new Promise<void>((r) => (timer = this.clock.after(TABLE_HOLD_MS, r)))]);
    timer?.cancel();
    if (!this.closed) this.send(ack);
  }

  private wake(): void {
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  }
}

/** The placement client the actor runtime uses when a placement address is configured. */
export function createRemotePlacement(options: RemotePlacementOptions): RemotePlacement {
  return new RemotePlacement(options);
}
