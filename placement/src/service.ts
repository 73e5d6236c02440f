/**
 * The placement service, apart from its transport: hosts connect (a stream each), report
 * themselves as heartbeats, and get the table of their namespace whenever the members change.
 *
 * A change is disseminated in one round of three phases, each sent to every connected host:
 * `lock` (hold actor calls), `update` (the new table), `unlock` (route by it). The round moves
 * from lock to update only when every host has acknowledged the lock, and to unlock only when
 * every host has acknowledged the update; so while any host routes by the new table, none routes
 * by the old one, and no actor call is routed by two tables. A host that does not acknowledge
 * within the ack timeout is dropped (its stream ended: it locks itself until it is back), and
 * the next round goes on without it. Changes that arrive during a round make the next round.
 *
 * A host silent for the heartbeat timeout (3 s by default, the reference runtime's) is removed,
 * and its actors move with the next round; a host whose stream ends is removed at once.
 */
import type { Logger } from 'pino';
import { SYSTEM_CLOCK, type Clock, type Timer } from '../../shared/clock.ts';
import { DEFAULT_REPLICATION_FACTOR } from './hashing.ts';
import { MemberTable, type HostReport, type TableEntries } from './table.ts';

export type Operation = 'lock' | 'update' | 'unlock';

export interface Order {
  operation: Operation;
  version: string;
  /** On `update` only: the host's namespace's table. */
  entries?: TableEntries;
  replicationFactor: number;
}

/** One host's stream, as the transport gives it. */
export interface HostStream {
  send(order: Order): void;
  /** Ends the stream, saying why (the host reconnects). */
  end(reason: string): void;
}

export interface PlacementServiceOptions {
  log: Logger;
  /** A host silent this long is removed (default 3000). */
  heartbeatTimeoutMs?: number;
  /** A host that does not acknowledge an order within this is dropped (default 2000). */
  ackTimeoutMs?: number;
  replicationFactor?: number;
  /**
   * After becoming active, wait this long before the first round, so hosts that were connected to
   * a previous leader are back in the first table (default 0).
   */
  settleMs?: number;
  clock?: Clock;
}

export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 3000;
export const DEFAULT_ACK_TIMEOUT_MS = 2000;

export interface PlacementSnapshot {
  active: boolean;
  hosts: number;
  streams: number;
  version: string;
  rounds: number;
}

export class PlacementService {
  readonly heartbeatTimeoutMs: number;
  readonly replicationFactor: number;
  private readonly ackTimeoutMs: number;
  private readonly settleMs: number;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly table = new MemberTable();
  private readonly sessions = new Set<Session>();
  private readonly byName = new Map<string, Session>();
  private active = false;
  private dirty = false;
  private running = false;
  private notBefore = 0;
  private settleTimer?: Timer;
  private sweepTimer?: Timer;
  /** Versions are `<epoch>.<n>`: the epoch changes with each activation, so a new leader never repeats one. */
  private epoch = 0;
  private n = 0;
  private version = '';
  private rounds = 0;
  private readonly roundListeners = new Set<(version: string) => void>();

  constructor(opts: PlacementServiceOptions) {
    this.log = opts.log;
    this.clock = opts.clock ?? SYSTEM_CLOCK;
    this.heartbeatTimeoutMs = opts.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    this.ackTimeoutMs = opts.ackTimeoutMs ?? DEFAULT_ACK_TIMEOUT_MS;
    this.replicationFactor = opts.replicationFactor ?? DEFAULT_REPLICATION_FACTOR;
    this.settleMs = opts.settleMs ?? 0;
  }

  /** Whether hosts may connect (this replica leads). */
  get accepting(): boolean {
    return this.active;
  }

  /** Starts serving: this replica is the only one (or became the leader). */
  activate(): void {
    if (this.active) return;
    this.active = true;
    this.epoch = this.clock.now();
    this.n = 0;
    this.notBefore = this.clock.now() + this.settleMs;
    const every = Math.max(50, Math.min(500, Math.floor(this.heartbeatTimeoutMs / 4)));
    this.sweepTimer = this.clock.every(every, () => this.sweep());
  }

  /** Stops serving (leadership lost, or closing): every stream ends, members are forgotten. */
  deactivate(reason: string): void {
    if (!this.active) return;
    this.active = false;
    this.sweepTimer?.cancel();
    this.settleTimer?.cancel();
    this.settleTimer = undefined;
    for (const s of [...this.sessions]) this.drop(s, reason);
    this.table.clear();
    this.dirty = false;
  }

  /** A host's stream opened; the transport passes its messages to the session. */
  connect(stream: HostStream): Session {
    const s = new Session(this, stream, this.clock.now());
    this.sessions.add(s);
    return s;
  }

  snapshot(): PlacementSnapshot {
    return { active: this.active, hosts: this.table.size, streams: this.sessions.size, version: this.version, rounds: this.rounds };
  }

  /** Called after each round with its version (tests, the bench). */
  onRound(listener: (version: string) => void): () => void {
    this.roundListeners.add(listener);
    return () => this.roundListeners.delete(listener);
  }

  /** @internal (Session) */
  reported(s: Session, h: HostReport): void {
    if (!this.active) return;
    if (s.name === undefined) {
      const old = this.byName.get(h.name);
      if (old && old !== s) this.drop(old, 'replaced by a newer stream from the same host');
      s.name = h.name;
      this.byName.set(h.name, s);
      this.log.info({ host: h.name, appId: h.id, namespace: h.namespace, entities: h.entities }, 'placement: host joined');
    } else if (s.name !== h.name) {
      this.drop(s, `a stream reports one host: it began as "${s.name}", now says "${h.name}"`);
      return;
    }
    s.namespace = h.namespace;
    if (this.table.upsert(h, this.clock.now())) this.changed();
  }

  /** @internal (Session): the stream is gone, however it ended. */
  ended(s: Session): void {
    if (!this.sessions.delete(s)) return;
    s.settleAcks();
    if (s.name !== undefined && this.byName.get(s.name) === s) {
      this.byName.delete(s.name);
      if (this.table.remove(s.name)) {
        this.log.info({ host: s.name }, 'placement: host left');
        this.changed();
      }
    }
  }

  private drop(s: Session, reason: string): void {
    if (s.name) this.log.warn({ host: s.name, reason }, 'placement: dropping host');
    s.stream.end(reason);
    this.ended(s);
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const name of this.table.silent(now, this.heartbeatTimeoutMs)) {
      const s = this.byName.get(name);
      if (s) this.drop(s, `no heartbeat for ${this.heartbeatTimeoutMs} ms`);
      else if (this.table.remove(name)) this.changed();
    }
    for (const s of [...this.sessions]) if (s.name === undefined && now - s.openedAt > this.heartbeatTimeoutMs) this.drop(s, `no host report within ${this.heartbeatTimeoutMs} ms`);
  }

  private changed(): void {
    this.dirty = true;
    this.schedule();
  }

  private schedule(): void {
    if (!this.active || this.running || !this.dirty || this.settleTimer) return;
    const wait = this.notBefore - this.clock.now();
    if (wait > 0) {
      this.settleTimer = this.clock.after(wait, () => {
        this.settleTimer = undefined;
        this.schedule();
      });
      return;
    }
    this.running = true;
    this.dirty = false;
    this.round()
      .catch((e: unknown) => this.log.error({ err: (e as Error).message }, 'placement: dissemination failed'))
      .finally(() => {
        this.running = false;
        this.schedule();
      });
  }

  private async round(): Promise<void> {
    const started = this.clock.now();
    const version = `${this.epoch}.${++this.n}`;
    const rf = this.replicationFactor;
    const hosts = [...this.sessions].filter((s) => s.name !== undefined);
    await this.phase(hosts, version, () => ({ operation: 'lock', version, replicationFactor: rf }));
    // taken after every host holds its calls: a change during the lock is in this table or the next
    const tables = new Map<string, TableEntries>();
    const tableOf = (ns: string) => tables.get(ns) ?? tables.set(ns, this.table.entries(ns)).get(ns)!;
    await this.phase(hosts, version, (s) => ({ operation: 'update', version, entries: tableOf(s.namespace), replicationFactor: rf }));
    for (const s of hosts) if (this.sessions.has(s)) s.stream.send({ operation: 'unlock', version, replicationFactor: rf });
    if (!this.active) return;
    this.version = version;
    this.rounds++;
    this.log.debug({ version, hosts: hosts.length, ms: this.clock.now() - started }, 'placement: table disseminated');
    for (const l of this.roundListeners) l(version);
  }

  /** Sends each live host its order and waits for every acknowledgement; drops who does not give one in time. */
  private async phase(hosts: Session[], version: string, order: (s: Session) => Order): Promise<void> {
    const live = hosts.filter((s) => this.sessions.has(s));
    const acks = live.map((s) => {
      const o = order(s);
      const acked = s.expect(o.operation, version, this.ackTimeoutMs);
      s.stream.send(o);
      return acked;
    });
    const results = await Promise.all(acks);
    live.forEach((s, i) => {
      if (results[i] === 'timeout' && this.sessions.has(s)) this.drop(s, `did not acknowledge "${order(s).operation}" of table ${version} within ${this.ackTimeoutMs} ms`);
    });
  }

  /** The clock, for sessions. @internal */
  get time(): Clock {
    return this.clock;
  }
}

type AckResult = 'acked' | 'timeout' | 'gone';

/** One host's stream on the service side. */
export class Session {
  name?: string;
  namespace = '';
  private pending?: { operation: Operation; version: string; done: (r: AckResult) => void; timer: Timer };

  private readonly service: PlacementService;
  readonly stream: HostStream;
  readonly openedAt: number;

  constructor(service: PlacementService, stream: HostStream, openedAt: number) {
    this.service = service;
    this.stream = stream;
    this.openedAt = openedAt;
  }

  /** A heartbeat (every message is one). */
  report(h: HostReport): void {
    this.service.reported(this, h);
  }

  /** The host applied an order. */
  ack(operation: string, version: string): void {
    const p = this.pending;
    if (p && p.operation === operation && p.version === version) {
      this.pending = undefined;
      p.timer.cancel();
      p.done('acked');
    }
  }

  /** The stream ended (the host left, or the transport lost it). */
  close(): void {
    this.service.ended(this);
  }

  /** @internal */
  expect(operation: Operation, version: string, timeoutMs: number): Promise<AckResult> {
    this.settleAcks();
    return new Promise((done) => {
      const timer = this.service.time.after(timeoutMs, () => {
        if (this.pending?.timer !== timer) return;
        this.pending = undefined;
        done('timeout');
      });
      this.pending = { operation, version, done, timer };
    });
  }

  /** @internal: a pending wait ends (the stream is gone). */
  settleAcks(): void {
    const p = this.pending;
    this.pending = undefined;
    p?.timer.cancel();
    p?.done('gone');
  }
}
