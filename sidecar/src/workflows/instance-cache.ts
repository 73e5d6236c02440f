/**
 * The instances in memory: each one's state and shown history as last read or written, the
 * etag its record was read with, and the mutations waiting for its next write. Records are read
 * in bulk, and the journal of each one that is new or changed is replayed (journal.ts).
 */
import type { StateItem, StateStore } from '../components/types.ts';
import type { PendingMutation } from './draft.ts';
import { isConflict } from './etag-retry.ts';
import { readInstance, readJournal, type JournaledInstance } from './journal.ts';
import { decode, encode, type Keys } from './keys.ts';
import type { HistoryEvent } from './proto.ts';
import type { InstanceRecord } from './record.ts';
import { JOURNAL_FORMAT, replay } from './reducer.ts';

export interface CachedInstance extends JournaledInstance {
  loaded: boolean;
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

  /**
   * Reads the instances of `list` into the cache: each record, and, for one that is new or
   * changed, its journal replayed (the record is where the journal ended when it was written).
   */
  async load(list: CachedInstance[]): Promise<void> {
    if (list.length === 0) return;
    const gens = list.map((c) => c.gen);
    // an instance read for the first time: its journal's first batch too, in the same round trip
    const fresh = list.filter((c) => !c.loaded);
    const items = await this.store.bulkGet([...list.map((c) => this.keys.record(c.id)), ...fresh.map((c) => this.keys.batch(c.id, 0))]);
    const heads = new Map(fresh.map((c, i) => [c, items[list.length + i]]));
    const changed: { c: CachedInstance; gen: number; rec: InstanceRecord | undefined }[] = [];
    list.forEach((c, i) => {
      if (c.gen !== gens[i]) return;
      const rec = absorb(c, items[i]);
      // no record, but a journal: the record (a cache) is rebuilt from it
      if (rec || (!items[i] && heads.get(c))) changed.push({ c, gen: gens[i], rec });
    });
    await Promise.all(
      changed.map(async ({ c, gen, rec }) => {
        const inst = rec ? await readInstance(this.store, this.keys, rec) : await this.rebuild(c.id);
        // a commit in the meantime already set the newer state
        if (c.gen !== gen || !inst) return;
        if (!rec) {
          // the rebuilt record's etag and bytes, as for one read
          const item = await this.store.get(this.keys.record(c.id));
          if (c.gen !== gen || !item) return;
          c.etag = item.etag;
          c.bytes = Buffer.from(item.value);
        }
        c.rec = inst.rec;
        c.history = inst.history;
        c.loaded = true;
      }),
    );
  }

  /**
   * Stores an instance's record again, derived from its journal (first-write: a record written
   * meanwhile, by another replica too, is newer). Undefined when there is no journal.
   */
  async rebuild(id: string): Promise<{ rec: InstanceRecord; history: HistoryEvent[] } | undefined> {
    const journal = await readJournal(this.store, this.keys, id);
    const inst = journal && replay(journal.events);
    if (!journal || !inst?.rec) return undefined;
    const rec: InstanceRecord = { ...inst.rec, v: journal.end - journal.from, chunks: journal.end, from: journal.from || undefined, fmt: JOURNAL_FORMAT };
    try {
      await this.store.set({ key: this.keys.record(id), value: encode(rec), options: { concurrency: 'first-write' } });
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
    this.invalidate(id);
    return { rec, history: inst.history };
  }
}

/**
 * Takes a read record into the cache. Returns it when the instance must be read (its journal):
 * it is new to the cache or changed in the store; undefined when the cache is current or the
 * instance does not exist.
 */
function absorb(c: CachedInstance, item: StateItem | undefined): InstanceRecord | undefined {
  if (!item) {
    c.rec = undefined;
    c.history = undefined;
    c.bytes = undefined;
    c.etag = undefined;
    c.loaded = true;
    return undefined;
  }
  const bytes = Buffer.from(item.value);
  c.etag = item.etag;
  if (c.loaded && c.bytes && c.bytes.equals(bytes)) return undefined;
  c.bytes = bytes;
  const rec = parseRecord(item);
  if (rec) {
    c.loaded = false;
    return rec;
  }
  c.rec = undefined;
  c.history = undefined;
  c.loaded = true;
  return undefined;
}

export function parseRecord(item: StateItem): InstanceRecord | undefined {
  try {
    const rec = decode<InstanceRecord>(item.value);
    return rec && typeof rec === 'object' && typeof rec.id === 'string' ? rec : undefined;
  } catch {
    return undefined;
  }
}
