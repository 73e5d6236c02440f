/**
 * The scheduler engine: keeps the owned jobs on a timer heap, fires each due job as a trigger
 * to one connected sidecar of its app, and moves the job on when the sidecar acks.
 *
 * Delivery is at-least-once: progress is written after the ack, so a crash between the two
 * fires that trigger again after restart. Fires missed while down are caught up in order,
 * because each next fire follows the previous due time, not the clock.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { SYSTEM_CLOCK, type Clock, type Timer } from '../../shared/clock.ts';
import { MinHeap } from './heap.ts';
import type { JobStore, ProgressUpdate, StoreListener } from './store/types.ts';
import {
  DEFAULT_FAILURE_POLICY,
  SchedulerError,
  keyString,
  targetString,
  type JobKey,
  type JobOwnerRef,
  type JobRecord,
  type JobSpec,
  type Target,
  type Trigger,
} from './types.ts';
import { buildRecord, nextFire, validateKey } from './validate.ts';

/** A sidecar's stream as the engine sees it. */
export interface Consumer {
  /** Shown in logs. */
  readonly name: string;
  /** false: it cannot deliver the app's own jobs (no app channel), only internal ones. Default true. */
  readonly appJobs?: boolean;
  send(t: Trigger): void;
}

interface Live {
  rec: JobRecord;
  ks: string;
  /** A trigger is out (or waiting for a retry): the job does not fire again until it settles. */
  busy: boolean;
  /** Being handed to another replica: no new fires, but the ack of the one out still counts. */
  releasing?: boolean;
  retryTimer?: Timer;
}

interface Inflight {
  trigger: Trigger;
  ks: string;
  gen: string;
  consumer?: ConsumerSlot;
  sentAt: number;
}

interface ConsumerSlot {
  consumer: Consumer;
  inflight: Set<string>;
  /** Its app's queue (an ack drains it without building the target's key again). */
  tq: TargetQueue;
}

interface TargetQueue {
  consumers: ConsumerSlot[];
  rr: number;
  /**
   * Triggers waiting for a sidecar of this app: none is connected, or every one already has
   * its window of un-acked triggers. A queue with a head index (acks drain it one by one).
   */
  pending: Trigger[];
  head: number;
}

/**
 * Un-acked triggers per sidecar stream. Keeps a burst from piling up in one sidecar's memory
 * and bounds what a crash can send twice (at-least-once) to about this many per sidecar.
 */
export const CONSUMER_WINDOW = 1024;

export interface EngineOptions {
  log: Logger;
  store: JobStore;
  /** A trigger not acked within this time counts as failed. Default 120 s. */
  ackTimeoutMs?: number;
  /** Time and timers: fires, retries, ack timeouts, progress writes (tests pass a ManualClock). */
  clock?: Clock;
}

export interface EngineStats {
  jobs: number;
  inflight: number;
  pending: number;
  fired: number;
  acked: number;
  failed: number;
}

const MAX_TIMER_MS = 60_000;
/**
 * Progress (acked fires) is written at most this often: a burst of thousands of acks becomes a
 * few transactions instead of one per event-loop turn (each commit writes its pages to the WAL).
 * A crash loses at most this much progress, and those fires repeat (delivery is at least once).
 */
export const PROGRESS_FLUSH_MS = 20;

export class SchedulerEngine implements StoreListener {
  private readonly log: Logger;
  readonly store: JobStore;
  private readonly clock: Clock;
  private readonly ackTimeoutMs: number;
  private readonly jobs = new Map<string, Live>();
  private readonly heap = new MinHeap<{ at: number; ks: string; gen: string }>();
  private readonly targets = new Map<string, TargetQueue>();
  private readonly inflight = new Map<string, Inflight>();
  private readonly progress = new Map<string, ProgressUpdate>();
  private timer?: Timer;
  private timerAt = Number.POSITIVE_INFINITY;
  private sweeper?: Timer;
  private flushing?: Promise<void>;
  private flushQueued = false;
  private nextTriggerId = 0;
  /** Made at the first trigger, not with the engine: node:crypto is ~1.5 MB of an idle sidecar's RSS. */
  private idPrefix: string | undefined;
  /** No new fires (closing); acks still count, so a handover can wait for them. */
  private stopping = false;
  private closed = false;
  readonly stats: EngineStats = { jobs: 0, inflight: 0, pending: 0, fired: 0, acked: 0, failed: 0 };

  constructor(opts: EngineOptions) {
    this.log = opts.log;
    this.store = opts.store;
    this.clock = opts.clock ?? SYSTEM_CLOCK;
    this.ackTimeoutMs = opts.ackTimeoutMs ?? 120_000;
  }

  async start(): Promise<void> {
    try {
      await this.store.start(this);
    } catch (e) {
      // jobs loaded before the failure armed the timer: a half-loaded engine must not run on
      this.stopping = true;
      this.timer?.cancel();
      await this.store.close().catch(() => undefined);
      this.closed = true;
      throw e;
    }
    this.sweeper = this.clock.every(Math.min(5000, this.ackTimeoutMs), () => this.sweepAckTimeouts());
    this.log.info({ store: this.store.describe(), jobs: this.jobs.size }, 'scheduler engine started');
  }

  private now(): number {
    return this.clock.now();
  }

  // ---- API -------------------------------------------------------------------------------

  /**
   * `requestId`: the caller's id for this create, the same on its retries. A retry of a create
   * that was stored but whose answer was lost (the scheduler died) finds its own job: success.
   */
  async schedule(key: JobKey, spec: JobSpec, overwrite: boolean, requestId?: string): Promise<void> {
    const rec = buildRecord(key, spec, this.now(), randomUUID());
    if (requestId) rec.requestId = requestId;
    if (overwrite) {
      await this.store.put(rec);
      return;
    }
    if (!(await this.store.create(rec))) {
      if (requestId && (await this.store.get(key))?.requestId === requestId) return;
      throw new SchedulerError('exists', 'RT_SCHEDULER_JOB_EXISTS', `job "${key.name}" already exists; send "overwrite": true to replace it`);
    }
  }

  async get(key: JobKey): Promise<JobRecord> {
    validateKey(key);
    const rec = await this.store.get(key);
    if (!rec || rec.nextAt === null || (rec.expiresAt !== undefined && rec.expiresAt < this.now())) {
      throw new SchedulerError('not_found', 'RT_SCHEDULER_GET_JOB', `job "${key.name}" not found`);
    }
    return rec;
  }

  async delete(key: JobKey): Promise<void> {
    validateKey(key);
    await this.store.delete(key);
  }

  async list(ref: JobOwnerRef): Promise<JobRecord[]> {
    const all = await this.store.list(ref);
    const now = this.now();
    return all.filter((r) => r.nextAt !== null && (r.expiresAt === undefined || r.expiresAt >= now));
  }

  // ---- sidecar streams -------------------------------------------------------------------

  /** Registers a sidecar of `target`; returns its disconnect function. */
  connect(target: Target, consumer: Consumer): () => void {
    const tq = this.queue(target);
    const slot: ConsumerSlot = { consumer, inflight: new Set(), tq };
    tq.consumers.push(slot);
    this.log.debug({ target, consumer: consumer.name }, 'sidecar connected');
    this.drain(tq);
    return () => this.disconnect(target, slot);
  }

  private disconnect(target: Target, slot: ConsumerSlot): void {
    const tq = this.queue(target);
    const i = tq.consumers.indexOf(slot);
    if (i < 0) return;
    tq.consumers.splice(i, 1);
    this.log.debug({ target, consumer: slot.consumer.name, inflight: slot.inflight.size }, 'sidecar disconnected');
    // whatever it had not acked goes to another sidecar of the app (or waits for one)
    for (const id of slot.inflight) {
      const inf = this.inflight.get(id);
      if (!inf) continue;
      this.inflight.delete(id);
      this.dispatch({ ...inf.trigger, id: this.newId() });
    }
    slot.inflight.clear();
    this.drain(tq);
  }

  /** The sidecar's answer for one trigger. */
  ack(id: string, ok: boolean): void {
    const inf = this.inflight.get(id);
    if (!inf || this.closed) return;
    this.inflight.delete(id);
    if (inf.consumer) {
      inf.consumer.inflight.delete(id);
      this.drain(inf.consumer.tq);
    }
    const live = this.jobs.get(inf.ks);
    if (!live || live.rec.gen !== inf.gen) return; // deleted or replaced meanwhile
    if (ok) {
      this.stats.acked++;
      this.complete(live);
      return;
    }
    this.stats.failed++;
    const policy = live.rec.spec.failurePolicy ?? DEFAULT_FAILURE_POLICY;
    const t = inf.trigger;
    if (policy.kind === 'constant' && (policy.maxRetries === undefined || t.attempt < policy.maxRetries)) {
      if (live.releasing) return; // the next owner fires it again
      live.retryTimer = this.clock.after(policy.intervalMs, () => {
        live.retryTimer = undefined;
        if (this.jobs.get(live.ks) !== live || this.stopping || live.releasing) return;
        this.dispatch({ ...t, id: this.newId(), attempt: t.attempt + 1 });
      });
      return;
    }
    this.log.warn({ job: t.key.name, appId: t.key.appId, attempts: t.attempt + 1 }, 'job trigger failed; giving up on this fire per its failure policy');
    this.complete(live);
  }

  // ---- store listener --------------------------------------------------------------------

  upsert(rec: JobRecord): void {
    const ks = keyString(rec.key);
    const old = this.jobs.get(ks);
    old?.retryTimer?.cancel();
    if (rec.nextAt === null) {
      this.jobs.delete(ks);
      return;
    }
    const live: Live = { rec, ks, busy: false };
    this.jobs.set(ks, live);
    this.push(live);
  }

  remove(key: JobKey): void {
    const ks = keyString(key);
    const old = this.jobs.get(ks);
    if (!old) return;
    old.retryTimer?.cancel();
    this.jobs.delete(ks);
  }

  async release(owns: (key: JobKey) => boolean): Promise<void> {
    const leaving: Live[] = [];
    for (const live of this.jobs.values()) {
      if (!owns(live.rec.key)) continue;
      live.releasing = true;
      // a failed trigger waiting for its retry: the next owner fires it again
      live.retryTimer?.cancel();
      live.retryTimer = undefined;
      leaving.push(live);
    }
    // wait (bounded) for the acks of triggers already out, so their progress is written
    // before the next owner reads the jobs; then let go
    const ids = new Set(leaving.map((l) => l.ks));
    const deadline = this.now() + 10_000;
    const busy = () => [...this.inflight.values()].some((i) => ids.has(i.ks));
    while (busy() && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const live of leaving) if (this.jobs.get(live.ks) === live) this.jobs.delete(live.ks);
    for (const [id, inf] of this.inflight) if (ids.has(inf.ks)) this.inflight.delete(id);
    for (const q of this.targets.values()) {
      q.pending = q.pending.slice(q.head).filter((t) => !ids.has(keyString(t.key)));
      q.head = 0;
    }
    await this.flush();
  }

  // ---- firing ----------------------------------------------------------------------------

  private push(live: Live): void {
    const rec = live.rec;
    if (rec.nextAt === null) return;
    // a job whose next fire lies past its ttl wakes at the ttl to be removed
    const at = rec.expiresAt !== undefined && rec.nextAt > rec.expiresAt ? rec.expiresAt : rec.nextAt;
    this.heap.push({ at, ks: live.ks, gen: rec.gen });
    if (at < this.timerAt) this.arm();
  }

  private arm(): void {
    if (this.stopping) return;
    const top = this.heap.peek();
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    if (!top) return;
    const delay = Math.max(0, Math.min(top.at - this.now(), MAX_TIMER_MS));
    this.timerAt = top.at;
    this.timer = this.clock.after(delay, () => this.tick());
  }

  private tick(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    for (;;) {
      const top = this.heap.peek();
      if (!top || top.at > now) break;
      this.heap.pop();
      const live = this.jobs.get(top.ks);
      if (!live || live.rec.gen !== top.gen || live.busy || live.releasing) continue;
      const rec = live.rec;
      if (rec.nextAt === null) continue;
      if (rec.expiresAt !== undefined && rec.nextAt > rec.expiresAt) {
        this.finish(live);
        continue;
      }
      if (rec.nextAt > now) {
        this.push(live);
        continue;
      }
      live.busy = true;
      this.stats.fired++;
      this.dispatch({ id: this.newId(), key: rec.key, dataJson: rec.spec.dataJson, dataAny: rec.spec.dataAny, dueAt: rec.nextAt, attempt: 0, gen: rec.gen }, live.ks);
    }
    this.arm();
  }

  /**
   * `ks`, `tq`: the job's key string and its app's queue when the caller has them (a burst
   * dispatches thousands); `chosen`: the sidecar drain() already picked.
   */
  private dispatch(t: Trigger, ks = keyString(t.key), tq = this.queue(t.key), chosen?: ConsumerSlot): void {
    const live = this.jobs.get(ks);
    // a trigger that waited while its job was deleted or replaced is dropped
    if (!live || live.releasing || t.gen !== live.rec.gen) return;
    const slot = chosen ?? this.pick(tq, t.key.owner === '');
    if (!slot) {
      tq.pending.push(t);
      return;
    }
    slot.inflight.add(t.id);
    this.inflight.set(t.id, { trigger: t, ks: live.ks, gen: live.rec.gen, consumer: slot, sentAt: this.now() });
    try {
      slot.consumer.send(t);
    } catch (e) {
      this.log.warn({ err: e, consumer: slot.consumer.name }, 'could not send a trigger; it counts as failed');
      queueMicrotask(() => this.ack(t.id, false));
    }
  }

  /** One fire is settled (acked, or given up on): move to the next, or finish. */
  private complete(live: Live): void {
    const rec = live.rec;
    rec.count++;
    const next = rec.nextAt === null ? null : nextFire(rec, rec.nextAt);
    if (next === null) {
      this.finish(live);
      return;
    }
    rec.nextAt = next;
    live.busy = false;
    this.saveLater({ key: rec.key, gen: rec.gen, count: rec.count, nextAt: next });
    if (!live.releasing) this.push(live);
  }

  private finish(live: Live): void {
    this.jobs.delete(live.ks);
    this.saveLater({ key: live.rec.key, gen: live.rec.gen, count: live.rec.count, nextAt: null });
  }

  // progress writes are batched: thousands of acks per second become a few transactions
  private saveLater(u: ProgressUpdate): void {
    if (this.closed) return; // after close the store is gone; the fire repeats after restart
    this.progress.set(keyString(u.key), u);
    if (this.flushQueued) return;
    this.flushQueued = true;
    this.clock.after(PROGRESS_FLUSH_MS, () => {
      this.flushQueued = false;
      void this.flush();
    });
  }

  /** Writes pending progress; resolves when it (and any write already running) is stored. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.progress.size === 0) return;
    const batch = [...this.progress.values()];
    this.progress.clear();
    this.flushing = this.store
      .saveProgress(batch)
      .catch((e) => {
        this.log.error({ err: e, updates: batch.length }, 'could not store job progress; will retry');
        for (const u of batch) if (!this.progress.has(keyString(u.key))) this.progress.set(keyString(u.key), u);
        this.clock.after(1000, () => void this.flush());
      })
      .finally(() => {
        this.flushing = undefined;
      });
    await this.flushing;
  }

  private sweepAckTimeouts(): void {
    const limit = this.now() - this.ackTimeoutMs;
    for (const [id, inf] of this.inflight) {
      if (inf.sentAt < limit) {
        this.log.warn({ job: inf.trigger.key.name }, 'no ack for a job trigger in time; it counts as failed');
        this.ack(id, false);
      }
    }
  }

  /**
   * The next sidecar (round robin) with room in its window that can take the trigger (an app
   * job needs one with an app channel); undefined when none can. No array per call: a burst
   * picks thousands of times.
   */
  private pick(tq: TargetQueue, appJob: boolean): ConsumerSlot | undefined {
    const n = tq.consumers.length;
    for (let i = 0; i < n; i++) {
      const slot = tq.consumers[(tq.rr + i) % n];
      if (slot.inflight.size < CONSUMER_WINDOW && (!appJob || slot.consumer.appJobs !== false)) {
        tq.rr = (tq.rr + i + 1) % n;
        return slot;
      }
    }
    return undefined;
  }

  /** Sends waiting triggers, oldest first, while a sidecar that can take the next one has room. */
  private drain(tq: TargetQueue): void {
    while (tq.head < tq.pending.length) {
      const t = tq.pending[tq.head];
      const slot = this.pick(tq, t.key.owner === '');
      if (!slot) break;
      tq.head++;
      this.dispatch(t, keyString(t.key), tq, slot);
    }
    if (tq.head > 1024 && tq.head * 2 > tq.pending.length) {
      tq.pending = tq.pending.slice(tq.head);
      tq.head = 0;
    }
  }

  private queue(t: Target): TargetQueue {
    const k = targetString(t);
    let q = this.targets.get(k);
    if (!q) {
      q = { consumers: [], rr: 0, pending: [], head: 0 };
      this.targets.set(k, q);
    }
    return q;
  }

  private newId(): string {
    return `${(this.idPrefix ??= randomUUID().slice(0, 8))}-${(this.nextTriggerId++).toString(36)}`;
  }

  snapshot(): EngineStats {
    let pending = 0;
    for (const q of this.targets.values()) pending += q.pending.length - q.head;
    return { ...this.stats, jobs: this.jobs.size, inflight: this.inflight.size, pending };
  }

  async close(): Promise<void> {
    this.stopping = true;
    this.timer?.cancel();
    this.sweeper?.cancel();
    for (const live of this.jobs.values()) live.retryTimer?.cancel();
    await this.flush();
    // the etcd store hands its partitions over here (waiting for acks of triggers in flight)
    await this.store.close();
    this.closed = true;
  }
}
