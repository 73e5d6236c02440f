/**
 * The journal as stored: what one write puts in the store (a new batch `h<n>` with the events
 * of the write, the record they lead to, or every key when the instance is gone), and reading a
 * journal back without its record.
 *
 * A `begin` in a write starts a new journal (continue-as-new, a finished id started again): it
 * is written as batch 0 and the batches after it are deleted. A record of an older version,
 * whose batches hold only the shown history, gets a journal that begins with its state.
 */
import type { StateStore, StateTransactionOperation } from '../components/types.ts';
import type { CachedInstance } from './instance-cache.ts';
import { decode, encode, type Keys } from './keys.ts';
import type { InstanceRecord, InstanceState } from './record.ts';
import { JOURNAL_FORMAT, isEngineEvent, stateOf, type InstanceEvent } from './reducer.ts';

/** Journal batches read per round trip while reading a journal without its record. */
const PROBE = 8;

export interface JournalWrite {
  ops: StateTransactionOperation[];
  /** The record written (absent: the instance was deleted). */
  stored?: InstanceRecord;
  bytes?: Buffer;
}

/**
 * The operations that store `events` on top of what is stored for `c`, leading to `rec`.
 * `shared`: etag checks (and first-write for a new record).
 */
export function journalWrite(keys: Keys, c: CachedInstance, events: InstanceEvent[], rec: InstanceState | undefined, shared: boolean): JournalWrite {
  const ops: StateTransactionOperation[] = [];
  const oldChunks = c.rec?.chunks ?? 0;
  const etag = shared ? c.etag : undefined;
  if (!rec) {
    if (c.rec) {
      ops.push({ operation: 'delete', request: { key: keys.record(c.id), etag } });
      for (let n = 0; n < oldChunks; n++) ops.push({ operation: 'delete', request: { key: keys.batch(c.id, n) } });
    }
    return { ops };
  }
  let batch = events;
  const at = batch.findLastIndex((e) => isEngineEvent(e) && e.rt === 'begin');
  let reset = at >= 0;
  if (at > 0) batch = batch.slice(at);
  else if (!reset && c.rec && c.rec.fmt !== JOURNAL_FORMAT) {
    batch = [{ rt: 'begin', state: stateOf(c.rec), history: c.history ?? [] }, ...batch];
    reset = true;
  }
  const first = reset ? 0 : oldChunks;
  ops.push({ operation: 'upsert', request: { key: keys.batch(c.id, first), value: encode(batch) } });
  if (reset) for (let n = first + 1; n < oldChunks; n++) ops.push({ operation: 'delete', request: { key: keys.batch(c.id, n) } });
  const stored: InstanceRecord = { ...rec, v: (c.rec?.v ?? 0) + 1, chunks: first + 1, fmt: JOURNAL_FORMAT };
  const bytes = encode(stored);
  ops.unshift({
    operation: 'upsert',
    request: c.rec
      ? { key: keys.record(c.id), value: bytes, etag }
      : { key: keys.record(c.id), value: bytes, options: { concurrency: shared ? 'first-write' : 'last-write' } },
  });
  return { ops, stored, bytes };
}

/**
 * An instance's journal read without its record: the store cannot list keys, but batches are
 * numbered from 0 without gaps, so they are read until one is missing. Undefined when there is
 * none, or the batches are an older version's (they do not begin with a `begin`).
 */
export async function readJournal(store: StateStore, keys: Keys, id: string): Promise<{ events: InstanceEvent[]; batches: number } | undefined> {
  const events: InstanceEvent[] = [];
  let batches = 0;
  for (let missing = false; !missing; ) {
    const items = await store.bulkGet(Array.from({ length: PROBE }, (_, i) => keys.batch(id, batches + i)));
    for (const it of items) {
      if (!it) {
        missing = true;
        break;
      }
      events.push(...decode<InstanceEvent[]>(it.value));
      batches++;
    }
  }
  const first = events[0];
  return first && isEngineEvent(first) && first.rt === 'begin' ? { events, batches } : undefined;
}
