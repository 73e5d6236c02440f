/**
 * state.in-memory: a Map in the sidecar's process. Etags are a store-wide counter (so a key
 * deleted and written again never gets an etag it had before); TTL is checked on every read
 * and expired items are swept every few seconds. Lost when the sidecar stops.
 */
import type { ComponentSpec, StateFeature, StateItem, StateTransactionOperation } from '../../types.ts';
import { IN_MEMORY_ETAG_RULES, checkConcurrency, requestEtag, ttlSeconds } from '../common.ts';
import { runQuery, type QueryableStateStore, type QueryResult, type StateQuery } from '../query.ts';
import { SyncStateStore } from '../sync-store.ts';

interface Entry {
  value: Buffer;
  etag: string;
  /** ms since epoch; undefined = never expires. */
  expiresAt?: number;
}

const FEATURES: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'TTL', 'ACTOR', 'QUERY_API'];
const SWEEP_MS = 5000;

class InMemoryStateStore extends SyncStateStore implements QueryableStateStore {
  protected readonly featureList = FEATURES;
  private readonly items = new Map<string, Entry>();
  private seq = 0;
  private sweeper?: NodeJS.Timeout;

  override async init(_spec: ComponentSpec): Promise<void> {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** A scan of the live items under the prefix. */
  async query(q: StateQuery, keyPrefix: string): Promise<QueryResult> {
    const items: StateItem[] = [];
    for (const key of this.items.keys()) {
      if (!key.startsWith(keyPrefix)) continue;
      const item = this.read(key);
      if (item) items.push(item);
    }
    return runQuery(items, q);
  }

  override async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.items.clear();
  }

  protected read(key: string): StateItem | undefined {
    const e = this.live(key);
    if (!e) return undefined;
    const item: StateItem = { key, value: e.value, etag: e.etag };
    if (e.expiresAt !== undefined) item.metadata = { ttlExpireTime: new Date(e.expiresAt).toISOString() };
    return item;
  }

  private live(key: string): Entry | undefined {
    const e = this.items.get(key);
    if (e && e.expiresAt !== undefined && e.expiresAt <= Date.now()) {
      this.items.delete(key);
      return undefined;
    }
    return e;
  }

  /**
   * Runs operations in order against a staged view and commits only when every check
   * passed: all or nothing. Synchronous, so no other request interleaves.
   */
  protected apply(ops: StateTransactionOperation[]): void {
    if (ops.length === 1) {
      // the common case without the staging map
      const op = ops[0];
      const next = this.prepare(op, this.live(op.request.key));
      if (next) this.items.set(op.request.key, next);
      else this.items.delete(op.request.key);
      return;
    }
    const staged = new Map<string, Entry | null>();
    for (const op of ops) {
      const k = op.request.key;
      const cur = staged.has(k) ? (staged.get(k) ?? undefined) : this.live(k);
      staged.set(k, this.prepare(op, cur) ?? null);
    }
    for (const [k, e] of staged) {
      if (e) this.items.set(k, e);
      else this.items.delete(k);
    }
  }

  /** Checks one operation against the current entry; returns the new entry (undefined = deleted). */
  private prepare(op: StateTransactionOperation, cur: Entry | undefined): Entry | undefined {
    const etag = requestEtag(op.request);
    checkConcurrency(op.request, etag, cur?.etag, IN_MEMORY_ETAG_RULES, op.operation === 'delete');
    if (op.operation === 'delete') return undefined;
    const ttl = ttlSeconds(op.request.metadata);
    // copy: the caller may reuse its buffer
    const entry: Entry = { value: Buffer.from(op.request.value), etag: String(++this.seq) };
    if (ttl !== undefined) entry.expiresAt = Date.now() + ttl * 1000;
    return entry;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [k, e] of this.items) if (e.expiresAt !== undefined && e.expiresAt <= now) this.items.delete(k);
  }
}

export const factory = () => new InMemoryStateStore();
