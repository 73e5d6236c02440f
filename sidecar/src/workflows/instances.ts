/**
 * The instance table: the only writer of workflow state. A change is a *mutation*: a function
 * that reads a draft of an instance and emits events (draft.ts, reducer.ts). A mutation that
 * emits nothing writes nothing. A write stores the events as one new journal batch plus the
 * record, the state they lead to (journal.ts; the record is a cache: `rebuild` derives it from
 * the batches again).
 *
 * Its parts:
 * - instance-cache.ts: records and histories in memory, read in bulk;
 * - group-commit.ts: the mutations of all instances that arrive while a write is in flight go
 *   into one store transaction; effects (dispatching work, arming timers, answering waiters)
 *   run only after the write succeeded;
 * - etag-retry.ts: shared stores (a component with `actorStateStore: "true"`, possibly used by
 *   several sidecar replicas) are written with etags: before a write the current records are
 *   read, and an instance another replica changed meanwhile has its mutations run again on the
 *   fresh copy. The embedded store belongs to this sidecar alone, so it is written without that read;
 * - active-index.ts: this replica's index of active instances; catalog.ts: every instance created.
 */
import type { Logger } from 'pino';
import type { StateStore, StateTransactionOperation } from '../components/types.ts';
import { ActiveIndex } from './active-index.ts';
import { Catalog } from './catalog.ts';
import { WorkingCopy, type Mutation } from './draft.ts';
import { commitWrites, isConflict } from './etag-retry.ts';
import { GroupCommit } from './group-commit.ts';
import { InstanceCache, parseRecord, type CachedInstance } from './instance-cache.ts';
import { journalWrite, type JournalWrite } from './journal.ts';
import { Keys } from './keys.ts';
import type { HistoryEvent } from './proto.ts';
import { isTerminal, type InstanceRecord } from './record.ts';

export type { Draft, Mutation } from './draft.ts';
export type { CachedInstance } from './instance-cache.ts';

export interface InstanceTableOptions {
  store: StateStore;
  /** Key prefix, e.g. `<appId>||wf||`. */
  prefix: string;
  /** true: other processes may write the same keys (etag checks on). */
  shared: boolean;
  replicaId: string;
  log: Logger;
}

/** One instance's part of a write: its store operations and what the cache takes once they are stored. */
interface Plan extends JournalWrite {
  c: CachedInstance;
  w: WorkingCopy;
  pending: CachedInstance['pending'];
}

export class InstanceTable {
  private readonly store: StateStore;
  private readonly keys: Keys;
  readonly shared: boolean;
  readonly replicaId: string;
  private readonly log: Logger;
  private readonly cache: InstanceCache;
  private readonly index: ActiveIndex;
  private readonly commits: GroupCommit<CachedInstance>;
  /** Index shards and catalog are written by one write at a time, so an older list never lands last. */
  private indexWriting = false;
  private closed = false;
  /** Every instance created, for listings (see catalog.ts); written like the index shards. */
  readonly catalog: Catalog;

  constructor(o: InstanceTableOptions) {
    this.store = o.store;
    this.keys = new Keys(o.prefix);
    this.shared = o.shared;
    this.replicaId = o.replicaId;
    this.log = o.log;
    this.cache = new InstanceCache(o.store, this.keys);
    this.index = new ActiveIndex(o.store, this.keys, o.replicaId, o.log);
    this.catalog = new Catalog(o.store, o.prefix, o.replicaId, o.log);
    this.commits = new GroupCommit(
      (batch) => this.flush(batch),
      (batch, e) => {
        this.log.error({ err: e }, 'workflow state write failed');
        for (const c of batch) for (const p of c.pending.splice(0)) p.reject(e);
      },
      () => this.index.hasChanges,
    );
  }

  /** The registry key of the replicas sharing this store. */
  get replicasKey(): string {
    return this.keys.replicas;
  }

  /**
   * Instances a replica was working on (this one by default, read at start; or a dead one's,
   * to adopt them).
   */
  loadIndex(replica = this.replicaId): Promise<string[]> {
    return this.index.load(replica);
  }

  /** Deletes the list of another replica (after adopting its instances). */
  dropIndex(replica: string): Promise<void> {
    return this.index.drop(replica);
  }

  activeCount(): number {
    return this.index.count;
  }

  get(id: string): CachedInstance {
    return this.cache.get(id);
  }

  peek(id: string): CachedInstance | undefined {
    return this.cache.peek(id);
  }

  /** Drops a finished instance from memory (the store keeps it). */
  evict(id: string): void {
    this.cache.evict(id);
  }

  /** Records for listings: as stored now (the cached state where this sidecar alone writes), without caching them. */
  async readMany(ids: string[]): Promise<(InstanceRecord | undefined)[]> {
    if (ids.length === 0) return [];
    const items = await this.store.bulkGet(ids.map((id) => this.keys.record(id)));
    return items.map((it, i) => {
      const c = this.shared ? undefined : this.cache.peek(ids[i]);
      return c?.loaded ? c.rec : it ? parseRecord(it) : undefined;
    });
  }

  /** The record as stored now (fresh read for shared stores, cache otherwise). */
  async read(id: string, fresh = this.shared): Promise<InstanceRecord | undefined> {
    const c = this.cache.peek(id);
    if (c?.loaded && !fresh) return c.rec;
    const item = await this.store.get(this.keys.record(id));
    return item ? parseRecord(item) : undefined;
  }

  /** Loads an instance into the cache if needed; its history. */
  async history(c: CachedInstance): Promise<HistoryEvent[]> {
    if (!c.loaded) await this.cache.load([c]);
    return c.history ?? [];
  }

  /**
   * Derives an instance's record from its journal again and stores it (the record is a cache of
   * the journal's state; a record found missing is rebuilt this way when the instance is read).
   * Undefined when there is no journal, or only an older version's batches.
   */
  async rebuild(id: string): Promise<InstanceRecord | undefined> {
    return (await this.cache.rebuild(id))?.rec;
  }

  /** Applies fn to the instance in the next group commit; resolves after the write. */
  mutate<T>(id: string, fn: Mutation<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('workflow engine is shutting down'));
    const c = this.cache.get(id);
    return new Promise<T>((resolve, reject) => {
      c.pending.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.commits.mark(c);
    });
  }

  /** Resolves once nothing waits to be written. */
  drain(): Promise<void> {
    return this.commits.drain();
  }

  close(): void {
    this.closed = true;
  }

  /** One group commit: read what is needed, run the mutations, write, then settle each instance. */
  private async flush(batch: CachedInstance[]): Promise<void> {
    // read unknown records; for shared stores every record (etag + freshness)
    await this.cache.load(this.shared ? batch : batch.filter((c) => !c.loaded));
    const plans = batch.map((c) => this.plan(c));
    // the index and the catalog go in the same transaction, by one write at a time
    const index = this.indexWriting ? undefined : this.index.takeOps();
    const catalog = this.indexWriting ? undefined : this.catalog.takeOps();
    const shared = [...(index?.ops ?? []), ...(catalog?.ops ?? [])];
    if (plans.every((p) => p.ops.length === 0) && shared.length === 0) {
      for (const p of plans) this.settle(p);
      return;
    }
    if (shared.length) this.indexWriting = true;
    try {
      await commitWrites((ops) => this.write(ops), plans, shared, { stored: (p) => this.settle(p), failed: (p, e) => this.retryOrFail(p, e) }, (e) => {
        this.log.warn({ err: e }, 'writing the workflow index failed; retried with the next write');
        index?.undo();
        catalog?.undo();
      });
    } finally {
      if (shared.length) this.indexWriting = false;
    }
  }

  private async write(ops: StateTransactionOperation[]): Promise<void> {
    if (this.store.transact) await this.store.transact(ops);
    else {
      const sets = ops.filter((o) => o.operation === 'upsert').map((o) => o.request);
      const dels = ops.filter((o) => o.operation === 'delete').map((o) => o.request);
      if (dels.length) await this.store.bulkDelete(dels);
      if (sets.length) await this.store.bulkSet(sets as never);
    }
  }

  /** Runs an instance's mutations on a draft; its write is the events they emitted. */
  private plan(c: CachedInstance): Plan {
    const pending = c.pending.splice(0);
    const w = new WorkingCopy(c.rec, c.history ?? []);
    w.run(pending);
    const { rec } = w.state;
    // this replica's list of active instances: those it wrote, until they finish
    if (!rec || isTerminal(rec.status)) this.index.mark(c.id, false);
    else if (w.events.length) this.index.mark(c.id, true);
    if (w.events.length === 0) return { c, w, pending, ops: [] };
    if (rec && !c.rec) this.catalog.created(c.id);
    return { c, w, pending, ...journalWrite(this.keys, c, w.events, rec, this.shared) };
  }

  /** The write of an instance is stored: the cache takes it, effects run, callers get their results. */
  private settle(p: Plan): void {
    const { c, w, pending } = p;
    if (w.events.length) {
      c.gen++;
      c.rec = p.stored;
      c.history = p.stored ? w.state.history : undefined;
      if (p.bytes || !p.stored) {
        c.bytes = p.bytes;
        // the store made a new etag we do not know: the next shared write reads it first
        c.etag = undefined;
      }
      c.loaded = true;
    }
    for (const fx of w.effects) {
      try {
        fx();
      } catch (e) {
        this.log.error({ err: e, instanceId: c.id }, 'workflow effect failed');
      }
    }
    for (const q of pending) {
      if (q.ok) q.resolve(q.result);
      else q.reject(q.error);
    }
    this.cache.forgetIfAbsent(c);
  }

  /** A write failed: a conflict runs the mutations again on a fresh read; else they fail. */
  private retryOrFail(p: Plan, e: unknown): void {
    const { c, pending } = p;
    if (isConflict(e) && this.shared) {
      this.log.debug({ instanceId: c.id }, 'workflow instance changed in the store (another replica); applying again on the fresh copy');
      c.loaded = false;
      c.bytes = undefined;
      for (const q of pending) {
        q.result = undefined;
        q.error = undefined;
        q.ok = undefined;
      }
      c.pending.unshift(...pending);
      this.commits.mark(c);
      return;
    }
    this.log.error({ err: e, instanceId: c.id }, 'workflow state write failed');
    for (const q of pending) q.reject(e);
  }
}
