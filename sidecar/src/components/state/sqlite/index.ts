/**
 * state.sqlite: one table in a SQLite file through node:sqlite (no native addon to build).
 *
 * Metadata:
 * - `connectionString` (required): a file path (parent folders are created), `file:<path>`,
 *   or `:memory:`. Required because a store that silently lives in memory would lose data
 *   a user expected to keep.
 * - `tableName` (default `state`), `busyTimeout` (duration, default 5s),
 *   `cleanupInterval` (duration, default 1h; 0 disables; expired rows are never returned).
 * Durations as every component reads them (components/metadata/decode.ts): `5s`, or seconds.
 *
 * Etags come from a counter row in `<tableName>_meta` bumped inside each write's transaction,
 * so they are unique in the file even across processes sharing it. WAL mode lets readers run
 * beside a writer. node:sqlite is synchronous: a write's check-and-set cannot interleave with
 * another request of this process.
 *
 * Layout: an ordinary (rowid) table whose primary-key index holds only the keys, with the value
 * last. A WITHOUT ROWID table kept each value inside its key's b-tree cell, so one 8 MB value
 * was read whole by every lookup whose search passed it (a bulk get of missing keys took seconds,
 * with the event loop blocked). Older files are moved to this layout at start.
 * Because every call runs on the event loop, a bulk get reads a slice of keys per turn.
 */
import { mkdirSync } from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { dirname, resolve } from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { decodeMetadata } from '../../metadata/decode.ts';
import type { ComponentSpec, StateFeature, StateItem, StateTransactionOperation } from '../../types.ts';
import { SQL_ETAG_RULES, checkConcurrency, requestEtag, sqlIdentifier, ttlSeconds } from '../common.ts';
import { runQuery, type QueryableStateStore, type QueryResult, type StateQuery } from '../query.ts';
import { SyncStateStore } from '../sync-store.ts';
import { METADATA } from './metadata.ts';

const FEATURES: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'TTL', 'ACTOR', 'QUERY_API'];

/** Keys a bulk get reads before it lets other work (health probes, other requests) run. */
const BULK_SLICE = 64;

interface Statements {
  get: StatementSync;
  current: StatementSync;
  nextEtag: StatementSync;
  upsert: StatementSync;
  del: StatementSync;
  cleanup: StatementSync;
  scan: StatementSync;
}

/** Parses `connectionString` into what DatabaseSync opens. */
export function sqlitePath(connectionString: string | undefined): string {
  const cs = (connectionString ?? '').trim();
  if (!cs) throw new Error('metadata connectionString is required: a file path (e.g. ./data/state.db) or ":memory:"');
  if (cs === ':memory:' || cs === 'file::memory:' || cs.startsWith('file::memory:?')) return ':memory:';
  const path = cs.startsWith('file:') ? cs.slice(5).split('?')[0] : cs;
  if (!path) throw new Error(`metadata connectionString "${cs}" names no file`);
  return resolve(path);
}

class SqliteStateStore extends SyncStateStore implements QueryableStateStore {
  protected readonly featureList = FEATURES;
  private db?: DatabaseSync;
  private st?: Statements;
  private cleaner?: NodeJS.Timeout;

  override async init(spec: ComponentSpec): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const path = sqlitePath(md.connectionString);
    const table = sqlIdentifier(md.tableName, 'tableName');
    const busyMs = md.busyTimeout;
    const cleanupMs = md.cleanupInterval;

    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(path, { timeout: Math.round(busyMs) });
    this.db = db;
    db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
    createTables(db, table);
    this.st = {
      get: db.prepare(`SELECT value, etag, expires_at FROM "${table}" WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)`),
      current: db.prepare(`SELECT etag FROM "${table}" WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)`),
      nextEtag: db.prepare(`UPDATE "${table}_meta" SET value = value + 1 WHERE name = 'etag' RETURNING value`),
      upsert: db.prepare(`INSERT INTO "${table}" (key, value, etag, expires_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value, etag = excluded.etag, expires_at = excluded.expires_at`),
      del: db.prepare(`DELETE FROM "${table}" WHERE key = ?`),
      cleanup: db.prepare(`DELETE FROM "${table}" WHERE expires_at IS NOT NULL AND expires_at <= ?`),
      scan: db.prepare(`SELECT key, value, etag FROM "${table}" WHERE substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2)`),
    };
    if (cleanupMs > 0) {
      this.cleaner = setInterval(() => this.cleanup(), cleanupMs);
      this.cleaner.unref();
    }
  }

  /** A scan of the live rows under the prefix, evaluated in JavaScript. */
  async query(q: StateQuery, keyPrefix: string): Promise<QueryResult> {
    const rows = this.statements().scan.all(keyPrefix, Date.now()) as { key: string; value: Uint8Array; etag: number }[];
    return runQuery(
      rows.map((r) => ({ key: r.key, value: r.value, etag: String(r.etag) })),
      q,
    );
  }

  /** Reads a slice of keys per turn of the event loop, so a large bulk never blocks it long. */
  override async bulkGet(keys: string[]): Promise<(StateItem | undefined)[]> {
    const out: (StateItem | undefined)[] = new Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      if (i > 0 && i % BULK_SLICE === 0) await nextTurn();
      out[i] = this.read(keys[i]);
    }
    return out;
  }

  async ping(): Promise<void> {
    this.statements().current.get('', Date.now());
  }

  override async close(): Promise<void> {
    if (this.cleaner) clearInterval(this.cleaner);
    const db = this.db;
    this.db = undefined;
    this.st = undefined;
    if (db?.isOpen) db.close();
  }

  private statements(): Statements {
    if (!this.st) throw new Error('sqlite state store is not open');
    return this.st;
  }

  protected read(key: string): StateItem | undefined {
    const row = this.statements().get.get(key, Date.now()) as { value: Uint8Array; etag: number; expires_at: number | null } | undefined;
    if (!row) return undefined;
    const item: StateItem = { key, value: Buffer.from(row.value.buffer, row.value.byteOffset, row.value.byteLength), etag: String(row.etag) };
    if (row.expires_at !== null) item.metadata = { ttlExpireTime: new Date(row.expires_at).toISOString() };
    return item;
  }

  /** Every write runs in one IMMEDIATE transaction: all operations or none. */
  protected apply(ops: StateTransactionOperation[]): void {
    const st = this.statements();
    const db = this.db as DatabaseSync;
    // validate what needs no database first, so a bad request never opens a transaction
    const prepared = ops.map((op) => ({
      op,
      etag: requestEtag(op.request),
      ttl: op.operation === 'upsert' ? ttlSeconds(op.request.metadata) : undefined,
    }));
    db.exec('BEGIN IMMEDIATE');
    try {
      const now = Date.now();
      for (const { op, etag, ttl } of prepared) {
        const key = op.request.key;
        const cur = st.current.get(key, now) as { etag: number } | undefined;
        checkConcurrency(op.request, etag, cur ? String(cur.etag) : undefined, SQL_ETAG_RULES, op.operation === 'delete');
        if (op.operation === 'delete') {
          st.del.run(key);
        } else {
          const next = (st.nextEtag.get() as { value: number }).value;
          st.upsert.run(key, op.request.value, next, ttl === undefined ? null : now + ttl * 1000);
        }
      }
      db.exec('COMMIT');
    } catch (e) {
      if (db.isTransaction) db.exec('ROLLBACK');
      throw e;
    }
  }

  private cleanup(): void {
    try {
      this.st?.cleanup.run(Date.now());
    } catch {
      // busy: the next round cleans up; reads never return expired rows anyway
    }
  }
}

/** Creates the tables (value last, keys in their own index), moving an older layout over. */
function createTables(db: DatabaseSync, table: string): void {
  const create = (name: string) => `CREATE TABLE IF NOT EXISTS "${name}" (
      key TEXT NOT NULL PRIMARY KEY,
      etag INTEGER NOT NULL,
      expires_at INTEGER,
      value BLOB NOT NULL
    )`;
  db.exec('BEGIN IMMEDIATE');
  try {
    const old = db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`).get(table) as { sql: string } | undefined;
    if (old && /WITHOUT\s+ROWID/i.test(old.sql)) {
      db.exec(`${create(`${table}__layout`)};
        INSERT INTO "${table}__layout" (key, etag, expires_at, value) SELECT key, etag, expires_at, value FROM "${table}";
        DROP TABLE "${table}";
        ALTER TABLE "${table}__layout" RENAME TO "${table}";`);
    }
    db.exec(`${create(table)};
      CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON "${table}" (expires_at) WHERE expires_at IS NOT NULL;
      CREATE TABLE IF NOT EXISTS "${table}_meta" (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL);
      INSERT OR IGNORE INTO "${table}_meta" (name, value) VALUES ('etag', 0);`);
    db.exec('COMMIT');
  } catch (e) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw e;
  }
}

export const factory = () => new SqliteStateStore();
