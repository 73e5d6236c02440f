/**
 * The embedded job store: one SQLite file (node:sqlite), one replica owning every job.
 * WAL with synchronous=NORMAL: a killed process loses nothing that was committed; only a
 * power cut can lose the last few progress writes (those jobs then fire again).
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Logger } from 'pino';
import type { JobKey, JobOwnerRef, JobRecord, JobSpec } from '../types.ts';
import { unloadable } from '../validate.ts';
import type { JobStore, ProgressUpdate, StoreListener } from './types.ts';

interface Row {
  namespace: string;
  app_id: string;
  owner: string;
  name: string;
  spec: string;
  created_at: number | bigint;
  gen: string;
  count: number | bigint;
  next_at: number | bigint | null;
  expires_at: number | bigint | null;
  request_id: string | null;
}

export class SqliteJobStore implements JobStore {
  private readonly path: string;
  private readonly log?: Logger;
  private db?: DatabaseSync;
  private listener?: StoreListener;
  private stmts!: {
    insert: StatementSync;
    upsert: StatementSync;
    get: StatementSync;
    del: StatementSync;
    list: StatementSync;
    progress: StatementSync;
    finish: StatementSync;
    quarantine: StatementSync;
  };

  /** `log`: where quarantined jobs are reported. */
  constructor(path: string, log?: Logger) {
    this.path = path;
    this.log = log;
  }

  async start(listener: StoreListener): Promise<void> {
    if (this.path !== ':memory:') mkdirSync(dirname(this.path), { recursive: true });
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(this.path);
    this.db = db;
    db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;
      CREATE TABLE IF NOT EXISTS jobs (
        namespace TEXT NOT NULL, app_id TEXT NOT NULL, owner TEXT NOT NULL, name TEXT NOT NULL,
        spec TEXT NOT NULL, created_at INTEGER NOT NULL, gen TEXT NOT NULL,
        count INTEGER NOT NULL, next_at INTEGER, expires_at INTEGER,
        PRIMARY KEY (namespace, app_id, owner, name)
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS jobs_quarantine (
        namespace TEXT, app_id TEXT, owner TEXT, name TEXT, spec TEXT, created_at, gen TEXT,
        count, next_at, expires_at, reason TEXT NOT NULL, quarantined_at INTEGER NOT NULL
      );`);
    // the id of the request that created the job: a retried create is recognised as its own
    const hasRequestId = (db.prepare('PRAGMA table_info(jobs)').all() as { name: string }[]).some((c) => c.name === 'request_id');
    if (!hasRequestId) db.exec('ALTER TABLE jobs ADD COLUMN request_id TEXT');
    const cols = 'namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at, request_id';
    const where = 'namespace = ? AND app_id = ? AND owner = ? AND name = ?';
    this.stmts = {
      insert: db.prepare(`INSERT INTO jobs (${cols}) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`),
      upsert: db.prepare(`INSERT OR REPLACE INTO jobs (${cols}) VALUES (?,?,?,?,?,?,?,?,?,?,?)`),
      get: db.prepare(`SELECT ${cols} FROM jobs WHERE ${where}`),
      del: db.prepare(`DELETE FROM jobs WHERE ${where}`),
      list: db.prepare(`SELECT ${cols} FROM jobs WHERE namespace = ? AND app_id = ? AND owner = ? ORDER BY name`),
      progress: db.prepare(`UPDATE jobs SET count = ?, next_at = ? WHERE ${where} AND gen = ?`),
      finish: db.prepare(`DELETE FROM jobs WHERE ${where} AND gen = ?`),
      quarantine: db.prepare(`INSERT INTO jobs_quarantine SELECT namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at, ?, ? FROM jobs WHERE ${where}`),
    };
    // integers are read as BigInt, so a value past 2^53 is a quarantined job, not a thrown load
    for (const st of [this.stmts.get, this.stmts.list]) st.setReadBigInts(true);
    this.listener = listener;
    const all = db.prepare(`SELECT ${cols} FROM jobs`);
    all.setReadBigInts(true);
    const bad: { row: Row; reason: string }[] = [];
    for (const row of all.iterate() as Iterable<Row>) {
      const r = this.load(row);
      if (typeof r === 'string') bad.push({ row, reason: r });
      else listener.upsert(r);
    }
    for (const { row, reason } of bad) this.quarantine(row, reason);
  }

  /** A row as a record, or why it cannot be run. */
  private load(row: Row): JobRecord | string {
    let rec: JobRecord;
    try {
      rec = fromRow(row);
    } catch (e) {
      return (e as Error).message;
    }
    return unloadable(rec) ?? rec;
  }

  /** Moves a job that cannot run aside (kept for a human to look at) and says so. */
  private quarantine(row: Row, reason: string): void {
    const key = { namespace: row.namespace, appId: row.app_id, owner: row.owner, name: row.name };
    this.log?.error({ job: key, reason, table: 'jobs_quarantine' }, `stored job "${String(row.name)}" cannot be loaded; moved to jobs_quarantine, the other jobs run`);
    const db = this.db;
    if (!db) return;
    db.exec('BEGIN');
    try {
      this.stmts.quarantine.run(reason, Date.now(), row.namespace, row.app_id, row.owner, row.name);
      this.stmts.del.run(row.namespace, row.app_id, row.owner, row.name);
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      this.log?.error({ err: e, job: key }, 'could not quarantine the job; it is skipped');
    }
  }

  /** Rows read during normal work: one that cannot run is quarantined, never returned. */
  private loadAll(rows: Row[]): JobRecord[] {
    const out: JobRecord[] = [];
    for (const row of rows) {
      const r = this.load(row);
      if (typeof r === 'string') this.quarantine(row, r);
      else out.push(r);
    }
    return out;
  }

  async create(rec: JobRecord): Promise<boolean> {
    const r = this.stmts.insert.run(...toParams(rec));
    if (Number(r.changes) === 0) return false;
    this.listener?.upsert(rec);
    return true;
  }

  async put(rec: JobRecord): Promise<void> {
    this.stmts.upsert.run(...toParams(rec));
    this.listener?.upsert(rec);
  }

  async get(key: JobKey): Promise<JobRecord | undefined> {
    const row = this.stmts.get.get(key.namespace, key.appId, key.owner, key.name) as Row | undefined;
    return row ? this.loadAll([row])[0] : undefined;
  }

  async delete(key: JobKey): Promise<void> {
    this.stmts.del.run(key.namespace, key.appId, key.owner, key.name);
    this.listener?.remove(key);
  }

  async list(ref: JobOwnerRef): Promise<JobRecord[]> {
    return this.loadAll(this.stmts.list.all(ref.namespace, ref.appId, ref.owner) as unknown as Row[]);
  }

  async saveProgress(updates: ProgressUpdate[]): Promise<void> {
    const db = this.db;
    if (!db) return; // closed: those fires simply repeat after the next start (at-least-once)
    db.exec('BEGIN');
    try {
      for (const u of updates) {
        const k = u.key;
        if (u.nextAt === null) this.stmts.finish.run(k.namespace, k.appId, k.owner, k.name, u.gen);
        else this.stmts.progress.run(u.count, u.nextAt, k.namespace, k.appId, k.owner, k.name, u.gen);
      }
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
  }

  describe(): string {
    return `sqlite:${this.path}`;
  }

  async close(): Promise<void> {
    this.db?.close();
    this.db = undefined;
  }
}

function toParams(r: JobRecord): (string | number | null)[] {
  const k = r.key;
  return [k.namespace, k.appId, k.owner, k.name, JSON.stringify(r.spec), r.createdAt, r.gen, r.count, r.nextAt, r.expiresAt ?? null, r.requestId ?? null];
}

/** A stored integer as a number; throws past 2^53, where a number would no longer be exact. */
function num(v: number | bigint, field: string): number {
  if (typeof v === 'bigint' && (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))) throw new Error(`${field} ${v} is too large to hold`);
  return Number(v);
}

function fromRow(row: Row): JobRecord {
  const rec: JobRecord = {
    key: { namespace: row.namespace, appId: row.app_id, owner: row.owner, name: row.name },
    spec: JSON.parse(row.spec) as JobSpec,
    createdAt: num(row.created_at, 'created_at'),
    gen: row.gen,
    count: num(row.count, 'count'),
    nextAt: row.next_at === null ? null : num(row.next_at, 'next_at'),
    expiresAt: row.expires_at === null ? undefined : num(row.expires_at, 'expires_at'),
  };
  if (row.request_id) rec.requestId = row.request_id;
  return rec;
}
