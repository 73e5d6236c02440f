/**
 * The journal as stored, and what one write puts in the store.
 *
 * An execution's journal is the batches `h<from>` … `h<end-1>`, one per write. A write appends
 * its events as batch `h<end>` with first-write: a writer that did not see the latest batch
 * (another replica appended one) fails with a conflict and runs its mutations again on the
 * fresh journal (etag-retry.ts), so the end of the journal is where concurrent writers meet.
 *
 * The record (`…||m`) is the state the journal leads to, a cache. It is rewritten when something
 * its readers see changes (SHOWN: status, output, custom status, failure, stall, …), not for a
 * write that only fills the inbox or moves the lease: those are one key, as they were before
 * the journal existed. So a stored record's `chunks` is where the journal ended when it was
 * written; a load reads the batches up to there and on until one is missing, and replays them.
 *
 * A `begin` in a write starts a new journal (continue-as-new, a finished id started again) at
 * the end of the old one, which is deleted; `h0` then points at the new start, so the journal can
 * be found without its record. A record of an older version, whose batches hold only the shown
 * history, gets a journal that begins with its state.
 */
import type { StateItem, StateStore, StateTransactionOperation } from '../components/types.ts';
import { decode, encode, type Keys } from './keys.ts';
import type { HistoryEvent } from './proto.ts';
import type { InstanceRecord, InstanceState } from './record.ts';
import { JOURNAL_FORMAT, isEngineEvent, replay, stateOf, type Instance, type InstanceEvent } from './reducer.ts';

/** Journal batches read per round trip past the end a record names. */
const PROBE = 8;

/** What readers of a stored record see: a write that changes one of these rewrites the record. */
export const SHOWN = ['status', 'name', 'version', 'input', 'output', 'customStatus', 'failure', 'executionId', 'parent', 'stalled', 'scheduledStart', 'startedAt', 'createdAt', 'terminatedRecursively'] as const;

/** `h0` of a journal that starts later (after a continue-as-new). */
interface StartPointer {
  journalFrom: number;
}

/** What a write reads of an instance in memory (instance-cache.ts's CachedInstance holds more). */
export interface JournaledInstance {
  id: string;
  /** The state (with the true end of its journal), once loaded. */
  rec?: InstanceRecord;
  history?: HistoryEvent[];
  /** The etag its record was read with. */
  etag?: string;
}

export interface JournalWrite {
  ops: StateTransactionOperation[];
  /** The instance as the cache keeps it after the write (absent: deleted). */
  stored?: InstanceRecord;
  /** The bytes of the record, when the write stores it. */
  bytes?: Buffer;
}

/** Whether readers of the stored record would see a difference (the reducer replaces what it changes). */
export function showsChange(a: InstanceState, b: InstanceState): boolean {
  return SHOWN.some((k) => a[k] !== b[k]);
}

/**
 * The operations that store `events` on top of what is stored for `c`, leading to `rec`.
 * `shared`: etag checks on the record (and first-write for a new one).
 */
export function journalWrite(keys: Keys, c: JournaledInstance, events: InstanceEvent[], rec: InstanceState | undefined, shared: boolean): JournalWrite {
  const ops: StateTransactionOperation[] = [];
  const from = c.rec?.from ?? 0;
  const end = c.rec?.chunks ?? 0;
  const etag = shared ? c.etag : undefined;
  if (!rec) {
    if (c.rec) {
      ops.push({ operation: 'delete', request: { key: keys.record(c.id), etag } });
      for (let n = from; n < end; n++) ops.push({ operation: 'delete', request: { key: keys.batch(c.id, n) } });
      if (from > 0) ops.push({ operation: 'delete', request: { key: keys.batch(c.id, 0) } });
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
  ops.push({ operation: 'upsert', request: { key: keys.batch(c.id, end), value: encode(batch), options: { concurrency: 'first-write' } } });
  let start = from;
  if (reset) {
    // the old journal goes; h0 points at the new one (unless the new one is h0)
    for (let n = from; n < end; n++) if (n > 0) ops.push({ operation: 'delete', request: { key: keys.batch(c.id, n) } });
    if (end > 0) ops.push({ operation: 'upsert', request: { key: keys.batch(c.id, 0), value: encode({ journalFrom: end } satisfies StartPointer) } });
    start = end;
  }
  const stored: InstanceRecord = { ...rec, v: c.rec?.v ?? 0, chunks: end + 1, from: start || undefined, fmt: JOURNAL_FORMAT };
  if (c.rec && !reset && c.rec.fmt === JOURNAL_FORMAT && !showsChange(c.rec, rec)) return { ops, stored };
  stored.v++;
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
 * The instance a stored record and its journal describe: the journal's batches from where the
 * record says it starts, up to its end and past it until a batch is missing, replayed. An older
 * version's record is the state, and its batches the history.
 */
export async function readInstance(store: StateStore, keys: Keys, rec: InstanceRecord): Promise<Instance & { rec: InstanceRecord }> {
  if (rec.fmt !== JOURNAL_FORMAT) {
    const items = rec.chunks > 0 ? await store.bulkGet(Array.from({ length: rec.chunks }, (_, n) => keys.batch(rec.id, n))) : [];
    return { rec, history: items.flatMap((it) => (it ? decode<HistoryEvent[]>(it.value) : [])) };
  }
  const from = rec.from ?? 0;
  const { events, end } = await readBatches(store, keys, rec.id, from, rec.chunks);
  const replayed = replay(events);
  if (!replayed.rec) return { rec, history: [] };
  return { rec: { ...replayed.rec, v: rec.v, chunks: end, from: rec.from, fmt: JOURNAL_FORMAT }, history: replayed.history };
}

/**
 * An instance's journal read without its record: `h0` is its first batch or points at it, and
 * batches follow without gaps. Undefined when there is none, or the batches are an older
 * version's (they do not begin with a `begin`).
 */
export async function readJournal(store: StateStore, keys: Keys, id: string): Promise<{ events: InstanceEvent[]; from: number; end: number } | undefined> {
  const head = await store.get(keys.batch(id, 0));
  if (!head) return undefined;
  const pointer = decode<StartPointer | unknown[]>(head.value);
  const from = Array.isArray(pointer) ? 0 : pointer.journalFrom;
  const { events, end } = await readBatches(store, keys, id, from, from);
  const first = events[0];
  return first && isEngineEvent(first) && first.rt === 'begin' ? { events, from, end } : undefined;
}

/** Batches `from` … `known - 1`, then on while they exist. */
async function readBatches(store: StateStore, keys: Keys, id: string, from: number, known: number): Promise<{ events: InstanceEvent[]; end: number }> {
  const events: InstanceEvent[] = [];
  let end = from;
  let want = Math.max(known - from, 0) + PROBE;
  for (;;) {
    const items: (StateItem | undefined)[] = await store.bulkGet(Array.from({ length: want }, (_, i) => keys.batch(id, end + i)));
    for (const it of items) {
      if (!it) return { events, end };
      events.push(...decode<InstanceEvent[]>(it.value));
      end++;
    }
    want = PROBE;
  }
}
