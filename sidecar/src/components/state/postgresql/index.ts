/**
 * state.postgresql through pg. Metadata: `connectionString` (required; a postgres:// URL or
 * libpq's key=value list, connection.ts), `tableName` (default `state`, `schema.table` allowed;
 * created when missing), `cleanupInterval` or its alias `cleanupIntervalInSeconds` (default 1h; 0
 * disables), `timeout` or its alias `timeoutInSeconds` (each query, default 20s), `maxConns`
 * (default 10); durations are `30s` or a number of seconds (components/metadata/decode.ts).
 * `metadataTableName` is accepted and unused (no migrations table).
 *
 * Etag = the row's `etag` version column, drawn from a sequence on every write, so it is
 * unique in the table (a key deleted and written again never gets an old etag back). Etag
 * checks are conditions of the UPDATE/DELETE itself, which row locks make race-free.
 * TTL = an `expires_at` column; rows past it are never returned and are swept periodically.
 * The query API runs as SQL (query.ts) over the values read as JSON.
 */
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { decodeMetadata } from '../../metadata/decode.ts';
import type { ComponentContext, ComponentSpec, StateDeleteRequest, StateFeature, StateItem, StateSetRequest, StateTransactionOperation } from '../../types.ts';
import { asBuffer, capabilitiesOf, requestEtag, sqlIdentifier, ttlSeconds } from '../common.ts';
import { EtagMismatchError, StateRequestError } from '../errors.ts';
import type { QueryableStateStore, QueryResult, StateQuery } from '../query.ts';
import { openPostgresPool } from './connection.ts';
import { METADATA } from './metadata.ts';
import { querySql } from './query.ts';

const FEATURES: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'TTL', 'ACTOR', 'QUERY_API'];

type Queryable = Pick<Pool | PoolClient, 'query'>;

interface Sql {
  get: string;
  bulkGet: string;
  upsert: string;
  insertFirst: string;
  updateIfEtag: string;
  del: string;
  delIfEtag: string;
  cleanup: string;
}

/** `table` or `schema.table`, each part a plain identifier; returned quoted. */
export function qualifiedTable(name: string): { quoted: string; plain: string } {
  const parts = name.split('.');
  if (parts.length > 2) throw new Error(`metadata tableName "${name}" must be table or schema.table`);
  const checked = parts.map((p) => sqlIdentifier(p, 'tableName'));
  return { quoted: checked.map((p) => `"${p}"`).join('.'), plain: checked.join('_') };
}

function statements(t: string, seq: string): Sql {
  const live = '(expires_at IS NULL OR expires_at > now())';
  const exp = 'CASE WHEN $3::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $3::integer) END';
  return {
    get: `SELECT value, etag, expires_at FROM ${t} WHERE key = $1 AND ${live}`,
    bulkGet: `SELECT key, value, etag, expires_at FROM ${t} WHERE key = ANY($1::text[]) AND ${live}`,
    upsert: `INSERT INTO ${t} (key, value, etag, expires_at) VALUES ($1, $2, nextval('${seq}'), ${exp})
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, etag = EXCLUDED.etag, expires_at = EXCLUDED.expires_at, updated_at = now()`,
    // first-write without an etag: create, or replace only an expired row
    insertFirst: `INSERT INTO ${t} AS s (key, value, etag, expires_at) VALUES ($1, $2, nextval('${seq}'), ${exp})
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, etag = EXCLUDED.etag, expires_at = EXCLUDED.expires_at, updated_at = now()
      WHERE s.expires_at IS NOT NULL AND s.expires_at <= now()`,
    updateIfEtag: `UPDATE ${t} SET value = $2, etag = nextval('${seq}'), expires_at = ${exp}, updated_at = now() WHERE key = $1 AND etag = $4 AND ${live}`,
    del: `DELETE FROM ${t} WHERE key = $1`,
    delIfEtag: `DELETE FROM ${t} WHERE key = $1 AND etag = $2 AND ${live}`,
    cleanup: `DELETE FROM ${t} WHERE expires_at IS NOT NULL AND expires_at <= now()`,
  };
}

class PostgresStateStore implements QueryableStateStore {
  private pool?: Pool;
  private sql?: Sql;
  /** Prefix of prepared statement names: one set per table. */
  private stmt = '';
  /** Quoted table and its JSON-reading function, for queries. */
  private table = '';
  private jsonFn = '';
  private cleaner?: NodeJS.Timeout;

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const table = qualifiedTable(md.tableName);
    const cleanupMs = Math.max(md.cleanupInterval, 0);
    const pool = await openPostgresPool(md.connectionString, {
      max: md.maxConns,
      queryTimeout: md.timeout,
      onError: (e) => ctx.log.warn({ component: spec.name, err: e.message }, 'postgresql state store connection error'),
    });
    this.pool = pool;
    const seqName = `${table.plain}_etag_seq`;
    const inSchema = (n: string) => (table.quoted.includes('.') ? `${table.quoted.split('.')[0]}."${n}"` : `"${n}"`);
    const seq = inSchema(seqName);
    const jsonFn = inSchema(`${table.plain}_jsonb`);
    const client = await pool.connect();
    try {
      // two sidecars starting at once must not race on CREATE … IF NOT EXISTS
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`rt-state:${table.plain}`]);
      await client.query(`CREATE TABLE IF NOT EXISTS ${table.quoted} (
        key TEXT NOT NULL PRIMARY KEY,
        value BYTEA NOT NULL,
        etag BIGINT NOT NULL,
        expires_at TIMESTAMPTZ,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
      await client.query(`CREATE SEQUENCE IF NOT EXISTS ${seq}`);
      await client.query(`CREATE INDEX IF NOT EXISTS "${table.plain}_expires_at" ON ${table.quoted} (expires_at) WHERE expires_at IS NOT NULL`);
      // for the query API: a value as JSON, NULL when it is not (a cast error would fail the query)
      await client.query(`CREATE OR REPLACE FUNCTION ${jsonFn}(v bytea) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $fn$
        BEGIN
          RETURN convert_from(v, 'UTF8')::jsonb;
        EXCEPTION WHEN others THEN
          RETURN NULL;
        END $fn$`);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
    // the sequence name inside nextval('…') is a string literal: escape its quotes
    this.sql = statements(table.quoted, seq.replaceAll("'", "''"));
    this.stmt = `rt_state_${table.plain}_`;
    this.table = table.quoted;
    this.jsonFn = jsonFn;
    if (cleanupMs > 0) {
      this.cleaner = setInterval(() => void this.q(this.pool!, 'cleanup', []).catch(() => undefined), cleanupMs);
      this.cleaner.unref();
    }
  }

  features(): StateFeature[] {
    return FEATURES;
  }

  capabilities(): string[] {
    return capabilitiesOf(FEATURES);
  }

  async get(key: string): Promise<StateItem | undefined> {
    const r = await this.q(this.db(), 'get', [key]);
    return r.rows[0] ? toItem(key, r.rows[0]) : undefined;
  }

  async bulkGet(keys: string[]): Promise<(StateItem | undefined)[]> {
    if (keys.length === 0) return [];
    const r = await this.q(this.db(), 'bulkGet', [keys]);
    const byKey = new Map<string, Row>(r.rows.map((row) => [row.key as string, row]));
    return keys.map((k) => {
      const row = byKey.get(k);
      return row ? toItem(k, row) : undefined;
    });
  }

  async set(req: StateSetRequest): Promise<void> {
    await this.run(this.db(), { operation: 'upsert', request: req });
  }

  async delete(req: StateDeleteRequest): Promise<void> {
    await this.run(this.db(), { operation: 'delete', request: req });
  }

  /** All or nothing, like a transaction. */
  async bulkSet(reqs: StateSetRequest[]): Promise<void> {
    await this.transact(reqs.map((request) => ({ operation: 'upsert', request })));
  }

  async bulkDelete(reqs: StateDeleteRequest[]): Promise<void> {
    await this.transact(reqs.map((request) => ({ operation: 'delete', request })));
  }

  async transact(ops: StateTransactionOperation[]): Promise<void> {
    if (ops.length === 0) return;
    for (const op of ops) this.check(op);
    if (ops.length === 1) return this.run(this.db(), ops[0]);
    const client = await this.db().connect();
    try {
      await client.query('BEGIN');
      for (const op of ops) await this.run(client, op);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  }

  /** The query language as SQL over the caller's keys (see query.ts). */
  async query(q: StateQuery, keyPrefix: string): Promise<QueryResult> {
    const { text, values } = querySql(this.table, this.jsonFn, q, keyPrefix);
    const r = await this.db().query<Row>({ text, values });
    const more = q.limit > 0 && r.rows.length > q.limit;
    const rows = more ? r.rows.slice(0, q.limit) : r.rows;
    const out: QueryResult = { results: rows.map((row) => ({ key: row.key as string, value: row.value, etag: String(row.etag) })) };
    if (more) out.token = String(q.offset + q.limit);
    return out;
  }

  async ping(): Promise<void> {
    await this.db().query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.cleaner) clearInterval(this.cleaner);
    const p = this.pool;
    this.pool = undefined;
    await p?.end().catch(() => undefined);
  }

  private db(): Pool {
    if (!this.pool) throw new Error('postgresql state store is not connected');
    return this.pool;
  }

  /** Request checks that need no database (so a transaction fails before BEGIN). */
  private check(op: StateTransactionOperation): void {
    // TEXT cannot hold NUL characters
    if (op.request.key.includes('\0')) throw new StateRequestError(`key "${op.request.key.replaceAll('\0', '\\0')}" contains a NUL character`);
    requestEtag(op.request);
    if (op.operation === 'upsert') ttlSeconds(op.request.metadata);
  }

  /** One operation; EtagMismatchError when its condition matched no row. */
  private async run(db: Queryable, op: StateTransactionOperation): Promise<void> {
    this.check(op);
    const r = op.request;
    const etag = requestEtag(r);
    const firstWrite = r.options?.concurrency === 'first-write';
    if (op.operation === 'upsert') {
      const ttl = ttlSeconds(r.metadata) ?? null;
      const value = asBuffer(op.request.value);
      if (etag !== undefined) {
        const res = await this.q(db, 'updateIfEtag', [r.key, value, ttl, etag]);
        if (res.rowCount === 0) throw new EtagMismatchError(r.key);
      } else if (firstWrite) {
        const res = await this.q(db, 'insertFirst', [r.key, value, ttl]);
        if (res.rowCount === 0) throw new EtagMismatchError(r.key, `key "${r.key}" already exists and no etag was sent (first-write)`);
      } else {
        await this.q(db, 'upsert', [r.key, value, ttl]);
      }
      return;
    }
    if (etag !== undefined) {
      const res = await this.q(db, 'delIfEtag', [r.key, etag]);
      if (res.rowCount === 0) throw new EtagMismatchError(r.key);
      return;
    }
    // as the reference store: a delete without an etag deletes, whatever the concurrency mode
    await this.q(db, 'del', [r.key]);
  }

  /** Runs one of the store's statements as a named (server-side prepared) statement. */
  private q(db: Queryable, name: keyof Sql, values: unknown[]) {
    const sql = this.sql;
    if (!sql) throw new Error('postgresql state store is not connected');
    const config: QueryConfig = { name: this.stmt + name, text: sql[name], values };
    return db.query<Row>(config);
  }
}

type Row = { key?: string; value: Buffer; etag: string; expires_at: Date | null };

function toItem(key: string, row: Row): StateItem {
  const item: StateItem = { key, value: row.value, etag: String(row.etag) };
  if (row.expires_at) item.metadata = { ttlExpireTime: row.expires_at.toISOString() };
  return item;
}

export const factory = () => new PostgresStateStore();
