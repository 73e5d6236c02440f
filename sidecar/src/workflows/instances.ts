/**
 * The instance table: a cache of instance records and histories in front of the actor state
 * store, and the only place that writes them.
 *
 * Every change is a *mutation*: a function that reads a draft of the instance and emits
 * events (reducer.ts), which change the draft and are appended to the instance's journal. A
 * mutation that emits nothing writes nothing. Mutations of all instances that arrive while a
 * write is in flight are applied together and written in one store transaction (group commit),
 * so the per-event cost is one shared transaction, not one per event. Effects (dispatching
 * work, arming timers, answering waiters) run only after the write succeeded.
 *
 * A write stores the events as one new journal batch plus the record, the state they lead to
 * (a cache: `rebuild` derives it from the batches again).
 *
 * Shared stores (a component with `actorStateStore: "true"`, possibly used by several sidecar
 * replicas) are written with etags: before a write the current items are read, a record that
 * changed under us is reloaded and its mutations run again on the fresh copy. The embedded
 * store belongs to this sidecar alone, so it is written without that read.
 */
import type { Logger } from 'pino';
import type { StateItem, StateStore, StateTransactionOperation } from '../components/types.ts';
import { Catalog } from './catalog.ts';
import type { HistoryEvent } from './proto.ts';
import { isTerminal, type InstanceRecord, type InstanceState } from './record.ts';
import { JOURNAL_FORMAT, applyEvent, draftOf, isEngineEvent, replay, stateOf, type Instance, type InstanceEvent } from './reducer.ts';

/** What a mutation sees and does. */
export interface Draft {
  /** The state after the events emitted so far; undefined when the instance does not exist. */
  readonly rec: Readonly<InstanceState> | undefined;
  /** The history shown to workers, after the events emitted so far. */
  readonly history: readonly HistoryEvent[];
  /** Applies events to the draft; they are written with the next group commit. */
  emit(...events: InstanceEvent[]): void;
  /** Run after the write succeeded, in order. */
  readonly effects: (() => void)[];
}

export type Mutation<T> = (d: Draft) => T;

/**
 * The draft one write's mutations share. The committed record and history are copied on the
 * first event, so mutations that only read cost no copy and a failed write leaves the cache as
 * it was.
 */
class WorkingCopy implements Draft {
  private inst: Instance;
  private copied = false;
  /** The events emitted, in order: the journal batch of this write. */
  readonly events: InstanceEvent[] = [];
  readonly effects: (() => void)[] = [];

  constructor(rec: InstanceRecord | undefined, history: HistoryEvent[]) {
    this.inst = { rec, history };
  }

  get rec(): Readonly<InstanceState> | undefined {
    return this.inst.rec;
  }

  get history(): readonly HistoryEvent[] {
    return this.inst.history;
  }

  get state(): Instance {
    return this.inst;
  }

  emit(...events: InstanceEvent[]): void {
    if (!this.copied) {
      this.inst = { rec: this.inst.rec && draftOf(this.inst.rec), history: [...this.inst.history] };
      this.copied = true;
    }
    for (const e of events) {
      this.inst = applyEvent(this.inst, e);
      this.events.push(e);
    }
  }
}

interface Pending {
  fn: Mutation<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  result?: unknown;
  error?: unknown;
  ok?: boolean;
}

export interface CachedInstance {
  id: string;
  rec?: InstanceRecord;
  history?: HistoryEvent[];
  loaded: boolean;
  etag?: string;
  /** Bytes last read or written, to recognise an unchanged record without parsing it. */
  bytes?: Buffer;
  /** Bumped by every commit: a read that started before it must not overwrite what it wrote. */
  gen: number;
  pending: Pending[];
}

const INDEX_SHARDS = 32;
/** Journal batches read per round trip while rebuilding a record. */
const PROBE = 8;
const MAX_FLUSHES = 4;
const enc = (v: unknown) => Buffer.from(JSON.stringify(v));

export interface InstanceTableOptions {
  store: StateStore;
  /** Key prefix, e.g. `<appId>||wf||`. */
  prefix: string;
  /** true: other processes may write the same keys (etag checks on). */
  shared: boolean;
  replicaId: string;
  log: Logger;
}

export class InstanceTable {
  private readonly store: StateStore;
  private readonly prefix: string;
  readonly shared: boolean;
  readonly replicaId: string;
  private readonly log: Logger;
  private readonly cache = new Map<string, CachedInstance>();
  private dirty = new Set<CachedInstance>();
  private scheduled = false;
  /** Writes in flight, and the instances they write. */
  private flushes = 0;
  private readonly writing = new Set<CachedInstance>();
  /** Index shards are written by one write at a time, so an older list never lands last. */
  private indexWriting = false;
  private closed = false;
  private readonly indexShards: Set<string>[] = [];
  private readonly dirtyShards = new Set<number>();
  private idle: (() => void)[] = [];
  /** Every instance created, for listings (see catalog.ts); written like the index shards. */
  readonly catalog: Catalog;

  constructor(o: InstanceTableOptions) {
    this.store = o.store;
    this.prefix = o.prefix;
    this.shared = o.shared;
    this.replicaId = o.replicaId;
    this.log = o.log;
    this.catalog = new Catalog(o.store, o.prefix, o.replicaId, o.log);
    for (let i = 0; i < INDEX_SHARDS; i++) this.indexShards.push(new Set());
  }

  metaKey(id: string): string {
    return `${this.prefix}${id}||m`;
  }

  chunkKey(id: string, n: number): string {
    return `${this.prefix}${id}||h${n}`;
  }

  private indexKey(shard: number, replica = this.replicaId): string {
    return `${this.prefix}index||${replica}||${shard}`;
  }

  /** The registry key of the replicas sharing this store. */
  get replicasKey(): string {
    return `${this.prefix}replicas`;
  }

  /**
   * Instances a replica was working on (this one by default, read at start; or a dead one's,
   * to adopt them). Only this replica's own list is kept in memory.
   */
  async loadIndex(replica = this.replicaId): Promise<string[]> {
    const items = await this.store.bulkGet(this.indexShards.map((_, i) => this.indexKey(i, replica)));
    const ids: string[] = [];
    items.forEach((it, i) => {
      if (!it) return;
      try {
        const list = JSON.parse(Buffer.from(it.value).toString('utf8')) as unknown;
        if (Array.isArray(list)) for (const id of list) if (typeof id === 'string') {
          if (replica === this.replicaId) this.indexShards[i].add(id);
          ids.push(id);
        }
      } catch {
        this.log.warn({ key: this.indexKey(i, replica) }, 'workflow index shard is not JSON; ignoring it');
      }
    });
    return ids;
  }

  /** Deletes the list of another replica (after adopting its instances). */
  async dropIndex(replica: string): Promise<void> {
    if (replica === this.replicaId) return;
    await this.store.bulkDelete(this.indexShards.map((_, i) => ({ key: this.indexKey(i, replica) })));
  }

  activeCount(): number {
    let n = 0;
    for (const s of this.indexShards) n += s.size;
    return n;
  }

  get(id: string): CachedInstance {
    let c = this.cache.get(id);
    if (!c) {
      c = { id, loaded: false, gen: 0, pending: [] };
      this.cache.set(id, c);
    }
    return c;
  }

  peek(id: string): CachedInstance | undefined {
    return this.cache.get(id);
  }

  /** Drops a finished instance from memory (the store keeps it). */
  evict(id: string): void {
    const c = this.cache.get(id);
    if (c && c.pending.length === 0) this.cache.delete(id);
  }

  /** Records as stored now, read without caching them (listings). */
  async readMany(ids: string[]): Promise<(InstanceRecord | undefined)[]> {
    if (ids.length === 0) return [];
    const items = await this.store.bulkGet(ids.map((id) => this.metaKey(id)));
    return items.map((it) => (it ? parseRecord(it) : undefined));
  }

  /** The record as stored now (fresh read for shared stores, cache otherwise). */
  async read(id: string, fresh = this.shared): Promise<InstanceRecord | undefined> {
    const c = this.cache.get(id);
    if (c?.loaded && !fresh) return c.rec;
    const item = await this.store.get(this.metaKey(id));
    return item ? parseRecord(item) : undefined;
  }

  /** Makes sure the cached history of a loaded instance is present. */
  async history(c: CachedInstance): Promise<HistoryEvent[]> {
    if (!c.loaded) await this.load([c]);
    if (!c.history) await this.loadHistories([c]);
    return c.history ?? [];
  }

  /**
   * Derives an instance's record from its journal again and stores it (the record is a cache of
   * the journal's state). Undefined when there is no journal, or only an older version's batches.
   */
  async rebuild(id: string): Promise<InstanceRecord | undefined> {
    const journal: InstanceEvent[] = [];
    // the store cannot list keys: batches are numbered from 0 without gaps, read until one is missing
    let chunks = 0;
    for (let missing = false; !missing; ) {
      const items = await this.store.bulkGet(Array.from({ length: PROBE }, (_, i) => this.chunkKey(id, chunks + i)));
      for (const it of items) {
        if (!it) {
          missing = true;
          break;
        }
        journal.push(...(JSON.parse(Buffer.from(it.value).toString('utf8')) as InstanceEvent[]));
        chunks++;
      }
    }
    const first = journal[0];
    if (!first || !isEngineEvent(first) || first.rt !== 'begin') return undefined;
    const { rec } = replay(journal);
    if (!rec) return undefined;
    const stored: InstanceRecord = { ...rec, v: chunks, chunks, fmt: JOURNAL_FORMAT };
    await this.store.set({ key: this.metaKey(id), value: enc(stored) });
    const c = this.cache.get(id);
    if (c) {
      c.loaded = false;
      c.bytes = undefined;
      c.history = undefined;
    }
    return stored;
  }

  /** Applies fn to the instance in the next group commit; resolves after the write. */
  mutate<T>(id: string, fn: Mutation<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('workflow engine is shutting down'));
    const c = this.get(id);
    return new Promise<T>((resolve, reject) => {
      c.pending.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.dirty.add(c);
      this.schedule();
    });
  }

  /** Resolves once nothing waits to be written. */
  async drain(): Promise<void> {
    if (this.flushes === 0 && this.dirty.size === 0) return;
    await new Promise<void>((r) => this.idle.push(r));
  }

  close(): void {
    this.closed = true;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate: gather what the current I/O turn produced into one transaction
    setImmediate(() => {
      this.scheduled = false;
      this.kick();
    });
  }

  /**
   * Starts a write of everything dirty that is not being written already. Up to MAX_FLUSHES
   * writes run at once (on disjoint instances), so a store with network round trips keeps
   * several transactions busy; one instance is never in two writes at a time.
   */
  private kick(): void {
    while (this.flushes < MAX_FLUSHES && this.dirty.size > 0) {
      const batch = [...this.dirty].filter((c) => !this.writing.has(c));
      if (batch.length === 0) break;
      for (const c of batch) {
        this.dirty.delete(c);
        this.writing.add(c);
      }
      this.flushes++;
      void this.flush(batch)
        .catch((e) => {
          this.log.error({ err: e }, 'workflow state write failed');
          for (const c of batch) for (const p of c.pending.splice(0)) p.reject(e);
        })
        .finally(() => {
          for (const c of batch) this.writing.delete(c);
          this.flushes--;
          if (this.dirty.size > 0 || this.dirtyShards.size > 0) this.schedule();
          else if (this.flushes === 0) for (const r of this.idle.splice(0)) r();
        });
    }
  }

  private async load(list: CachedInstance[]): Promise<void> {
    if (list.length === 0) return;
    const gens = list.map((c) => c.gen);
    const items = await this.store.bulkGet(list.map((c) => this.metaKey(c.id)));
    list.forEach((c, i) => {
      if (c.gen === gens[i]) this.absorb(c, items[i]);
    });
  }

  /** Takes a read item into the cache; a changed record drops the cached history. */
  private absorb(c: CachedInstance, item: StateItem | undefined): void {
    if (!item) {
      if (c.loaded && c.rec) c.history = undefined;
      c.rec = undefined;
      c.bytes = undefined;
      c.etag = undefined;
      c.loaded = true;
      return;
    }
    const bytes = Buffer.from(item.value);
    c.etag = item.etag;
    if (c.loaded && c.bytes && c.bytes.equals(bytes)) return;
    const rec = parseRecord(item);
    if (!c.rec || !rec || rec.chunks < (c.rec.chunks ?? 0) || rec.executionId !== c.rec.executionId || rec.chunks !== c.rec.chunks) c.history = undefined;
    c.rec = rec;
    c.bytes = bytes;
    c.loaded = true;
  }

  private async loadHistories(list: CachedInstance[]): Promise<void> {
    const want = list.filter((c) => c.rec && !c.history);
    if (want.length === 0) return;
    const gens = want.map((c) => c.gen);
    const keys: string[] = [];
    for (const c of want) for (let n = 0; n < (c.rec as InstanceRecord).chunks; n++) keys.push(this.chunkKey(c.id, n));
    const items = keys.length ? await this.store.bulkGet(keys) : [];
    let k = 0;
    want.forEach((c, i) => {
      const rec = c.rec as InstanceRecord;
      const batches: unknown[][] = [];
      for (let n = 0; n < rec.chunks; n++) {
        const it = items[k++];
        if (it) batches.push(JSON.parse(Buffer.from(it.value).toString('utf8')) as unknown[]);
      }
      // a journal replays to the history; an older version's batches are the history
      const h = rec.fmt === JOURNAL_FORMAT ? replay(batches.flat() as InstanceEvent[]).history : (batches.flat() as HistoryEvent[]);
      // a commit in the meantime already set the newer history (or will reload it)
      if (c.gen === gens[i] && !c.history) c.history = h;
    });
  }

  private async flush(batch: CachedInstance[]): Promise<void> {
    // 1. read what we need: unknown records; for shared stores every record (etag + freshness)
    await this.load(this.shared ? batch : batch.filter((c) => !c.loaded));
    await this.loadHistories(batch);

    // 2. apply mutations on drafts, collect store operations
    const plans = batch.map((c) => this.plan(c));
    const ops = plans.flatMap((p) => p.ops);
    const shards = this.indexWriting ? [] : [...this.dirtyShards];
    // the catalog is appended in the same transaction, by one write at a time like the index
    const cat = this.indexWriting ? undefined : this.catalog.takeOps();
    const shardOps = [...this.indexOps(shards), ...(cat?.ops ?? [])];
    if (ops.length === 0 && shardOps.length === 0) {
      for (const p of plans) this.finish(p);
      return;
    }
    if (shardOps.length) this.indexWriting = true;
    try {
      await this.commit(plans, ops, shardOps, shards, cat?.undo);
    } finally {
      if (shardOps.length) this.indexWriting = false;
    }
  }

  private async commit(plans: Plan[], ops: StateTransactionOperation[], shardOps: StateTransactionOperation[], shards: number[], undoCatalog?: () => void): Promise<void> {
    // 3. one transaction; when it fails (an etag moved), write instance by instance
    try {
      await this.write([...ops, ...shardOps]);
      for (const p of plans) this.finish(p);
      return;
    } catch (e) {
      if (plans.filter((p) => p.ops.length > 0).length <= 1 && shardOps.length === 0) {
        for (const p of plans) {
          if (p.ops.length > 0) this.retryOrFail(p, e);
          else this.finish(p);
        }
        return;
      }
    }
    if (shardOps.length) {
      await this.write(shardOps).catch((e) => {
        this.log.warn({ err: e }, 'writing the workflow index failed; retried with the next write');
        for (const n of shards) this.dirtyShards.add(n);
        undoCatalog?.();
      });
    }
    for (const p of plans) {
      if (p.ops.length === 0) {
        this.finish(p);
        continue;
      }
      try {
        await this.write(p.ops);
        this.finish(p);
      } catch (e) {
        this.retryOrFail(p, e);
      }
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

  private plan(c: CachedInstance): Plan {
    const pending = c.pending.splice(0);
    const w = new WorkingCopy(c.rec, c.history ?? []);
    for (const p of pending) {
      try {
        p.result = p.fn(w);
        p.ok = true;
      } catch (e) {
        p.error = e;
        p.ok = false;
      }
    }
    const { rec } = w.state;
    const ops: StateTransactionOperation[] = [];
    // this replica's list of active instances: those it wrote, until they finish
    if (!rec || isTerminal(rec.status)) this.index(c.id, false);
    else if (w.events.length) this.index(c.id, true);
    if (w.events.length === 0) return { c, w, pending, ops };
    if (rec && !c.rec) this.catalog.created(c.id);
    const oldChunks = c.rec?.chunks ?? 0;
    const etag = this.shared ? c.etag : undefined;
    if (!rec) {
      if (c.rec) {
        ops.push({ operation: 'delete', request: { key: this.metaKey(c.id), etag } });
        for (let n = 0; n < oldChunks; n++) ops.push({ operation: 'delete', request: { key: this.chunkKey(c.id, n) } });
      }
      return { c, w, pending, ops };
    }
    // a begin starts a new journal (continue-as-new, a finished id started again): the batches
    // before it go. A record of an older version, whose batches hold only the shown history,
    // gets a journal that begins with its state.
    let batch = w.events;
    const at = batch.findLastIndex((e) => isEngineEvent(e) && e.rt === 'begin');
    let reset = at >= 0;
    if (at > 0) batch = batch.slice(at);
    else if (!reset && c.rec && c.rec.fmt !== JOURNAL_FORMAT) {
      batch = [{ rt: 'begin', state: stateOf(c.rec), history: c.history ?? [] }, ...batch];
      reset = true;
    }
    const first = reset ? 0 : oldChunks;
    ops.push({ operation: 'upsert', request: { key: this.chunkKey(c.id, first), value: enc(batch) } });
    if (reset) for (let n = first + 1; n < oldChunks; n++) ops.push({ operation: 'delete', request: { key: this.chunkKey(c.id, n) } });
    const stored: InstanceRecord = { ...rec, v: (c.rec?.v ?? 0) + 1, chunks: first + 1, fmt: JOURNAL_FORMAT };
    const bytes = enc(stored);
    ops.unshift({
      operation: 'upsert',
      request: c.rec
        ? { key: this.metaKey(c.id), value: bytes, etag }
        : { key: this.metaKey(c.id), value: bytes, options: { concurrency: this.shared ? 'first-write' : 'last-write' } },
    });
    return { c, w, pending, ops, stored, bytes };
  }

  /** Adds an instance to this replica's list of active instances, or removes it. */
  private index(id: string, on: boolean): void {
    const shard = shardOf(id);
    const set = this.indexShards[shard];
    if (on && !set.has(id)) {
      set.add(id);
      this.dirtyShards.add(shard);
    } else if (!on && set.delete(id)) this.dirtyShards.add(shard);
  }

  private indexOps(shards: number[]): StateTransactionOperation[] {
    for (const n of shards) this.dirtyShards.delete(n);
    return shards.map((n) => ({ operation: 'upsert', request: { key: this.indexKey(n), value: enc([...this.indexShards[n]]) } }));
  }

  private finish(p: Plan): void {
    const { c, w, pending } = p;
    if (w.events.length) {
      c.gen++;
      if (!p.stored) {
        c.rec = undefined;
        c.history = undefined;
        c.bytes = undefined;
        c.etag = undefined;
      } else {
        c.history = w.state.history;
        c.rec = p.stored;
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
    // lookups of ids that do not exist must not grow the cache
    if (c.loaded && !c.rec && c.pending.length === 0 && this.cache.get(c.id) === c) this.cache.delete(c.id);
  }

  /** A write failed: an etag conflict runs the mutations again on a fresh read; else they fail. */
  private retryOrFail(p: Plan, e: unknown): void {
    const { c, pending } = p;
    const conflict = (e as Error)?.name === 'EtagMismatchError';
    if (conflict && this.shared) {
      this.log.debug({ instanceId: c.id }, 'workflow instance changed in the store (another replica); applying again on the fresh copy');
      c.loaded = false;
      c.bytes = undefined;
      for (const q of pending) {
        q.result = undefined;
        q.error = undefined;
        q.ok = undefined;
      }
      c.pending.unshift(...pending);
      this.dirty.add(c);
      return;
    }
    this.log.error({ err: e, instanceId: c.id }, 'workflow state write failed');
    for (const q of pending) q.reject(e);
  }
}

interface Plan {
  c: CachedInstance;
  w: WorkingCopy;
  pending: Pending[];
  ops: StateTransactionOperation[];
  /** The record written (absent: none, or the instance was deleted). */
  stored?: InstanceRecord;
  bytes?: Buffer;
}

export function parseRecord(item: StateItem): InstanceRecord | undefined {
  try {
    const rec = JSON.parse(Buffer.from(item.value).toString('utf8')) as InstanceRecord;
    return rec && typeof rec === 'object' && typeof rec.id === 'string' ? rec : undefined;
  } catch {
    return undefined;
  }
}

function shardOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
  return Math.abs(h) % INDEX_SHARDS;
}
