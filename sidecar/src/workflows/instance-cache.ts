/**
 * The instances in memory: each one's record and shown history as last read or written, the
 * etag it was read with, and the mutations waiting for its next write. Records are read in
 * bulk; a history is read only when a run or a mutation needs it, by replaying the journal.
 */
import type { StateItem, StateStore } from '../components/types.ts';
import type { PendingMutation } from './draft.ts';
import { decode, type Keys } from './keys.ts';
import type { HistoryEvent } from './proto.ts';
import type { InstanceRecord } from './record.ts';
import { JOURNAL_FORMAT, replay, type InstanceEvent } from './reducer.ts';

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
  pending: PendingMutation[];
}

export class InstanceCache {
  private readonly store: StateStore;
  private readonly keys: Keys;
  private readonly byId = new Map<string, CachedInstance>();

  constructor(store: StateStore, keys: Keys) {
    this.store = store;
    this.keys = keys;
  }

  get(id: string): CachedInstance {
    let c = this.byId.get(id);
    if (!c) {
      c = { id, loaded: false, gen: 0, pending: [] };
      this.byId.set(id, c);
    }
    return c;
  }

  peek(id: string): CachedInstance | undefined {
    return this.byId.get(id);
  }

  /** Drops an instance from memory (the store keeps it) unless mutations wait for it. */
  evict(id: string): void {
    const c = this.byId.get(id);
    if (c && c.pending.length === 0) this.byId.delete(id);
  }

  /** Drops `c` if it is known not to exist and nothing waits for it (lookups must not grow the cache). */
  forgetIfAbsent(c: CachedInstance): void {
    if (c.loaded && !c.rec && c.pending.length === 0 && this.byId.get(c.id) === c) this.byId.delete(c.id);
  }

  /** Forgets what is cached of an instance: the next use reads it from the store. */
  invalidate(id: string): void {
    const c = this.byId.get(id);
    if (!c) return;
    c.loaded = false;
    c.bytes = undefined;
    c.history = undefined;
  }

  /** Reads the records of `list` into the cache. */
  async load(list: CachedInstance[]): Promise<void> {
    if (list.length === 0) return;
    const gens = list.map((c) => c.gen);
    const items = await this.store.bulkGet(list.map((c) => this.keys.record(c.id)));
    list.forEach((c, i) => {
      if (c.gen === gens[i]) absorb(c, items[i]);
    });
  }

  /** Reads the histories of the instances of `list` that exist and have none in memory. */
  async loadHistories(list: CachedInstance[]): Promise<void> {
    const want = list.filter((c) => c.rec && !c.history);
    if (want.length === 0) return;
    const gens = want.map((c) => c.gen);
    const keys: string[] = [];
    for (const c of want) for (let n = 0; n < (c.rec as InstanceRecord).chunks; n++) keys.push(this.keys.batch(c.id, n));
    const items = keys.length ? await this.store.bulkGet(keys) : [];
    let k = 0;
    want.forEach((c, i) => {
      const rec = c.rec as InstanceRecord;
      const batches: unknown[][] = [];
      for (let n = 0; n < rec.chunks; n++) {
        const it = items[k++];
        if (it) batches.push(decode<unknown[]>(it.value));
      }
      // a journal replays to the history; an older version's batches are the history
      const h = rec.fmt === JOURNAL_FORMAT ? replay(batches.flat() as InstanceEvent[]).history : (batches.flat() as HistoryEvent[]);
      // a commit in the meantime already set the newer history (or will reload it)
      if (c.gen === gens[i] && !c.history) c.history = h;
    });
  }
}

/** Takes a read item into the cache; a changed record drops the cached history. */
function absorb(c: CachedInstance, item: StateItem | undefined): void {
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
  if (!c.rec || !rec || rec.executionId !== c.rec.executionId || rec.chunks !== c.rec.chunks) c.history = undefined;
  c.rec = rec;
  c.bytes = bytes;
  c.loaded = true;
}

export function parseRecord(item: StateItem): InstanceRecord | undefined {
  try {
    const rec = decode<InstanceRecord>(item.value);
    return rec && typeof rec === 'object' && typeof rec.id === 'string' ? rec : undefined;
  } catch {
    return undefined;
  }
}
