/**
 * The embedded job store: one SQLite file (node:sqlite), one replica owning every job.
 * WAL with synchronous=NORMAL: a killed process loses nothing that was committed; only a
 * power cut can lose the last few progress writes (those jobs then fire again).
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { JobKey, JobOwnerRef, JobRecord, JobSpec } from '../types.ts';
import type { JobStore, ProgressUpdate, StoreListener } from './types.ts';

interface Row {
  namespace: string;
  app_id: string;
  owner: string;
  name: string;
  spec: string;
  created_at: number;
  gen: string;
  count: number;
  next_at: number | null;
  expires_at: number | null;
}

export class SqliteJobStore implements JobStore {
  private readonly path: string;
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
  };

  constructor(path: string) {
    this.path = path;
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
      ) WITHOUT ROWID;`);
    const cols = 'namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at';
    const where = 'namespace = ? AND app_id = ? AND owner = ? AND name = ?';
    this.stmts = {
      insert: db.prepare(`INSERT INTO jobs (${cols}) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`),
      upsert: db.prepare(`INSERT OR REPLACE INTO jobs (${cols}) VALUES (?,?,?,?,?,?,?,?,?,?)`),
      get: db.prepare(`SELECT ${cols} FROM jobs WHERE ${where}`),
      del: db.prepare(`DELETE FROM jobs WHERE ${where}`),
      list: db.prepare(`SELECT ${cols} FROM jobs WHERE namespace = ? AND app_id = ? AND owner = ? ORDER BY name`),
      progress: db.prepare(`UPDATE jobs SET count = ?, next_at = ? WHERE ${where} AND gen = ?`),
      finish: db.prepare(`DELETE FROM jobs WHERE ${where} AND gen = ?`),
    };
    this.listener = listener;
    for (const row of db.prepare(`SELECT ${cols} FROM jobs`).iterate() as Iterable<Row>) listener.upsert(fromRow(row));
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
    return row ? fromRow(row) : undefined;
  }

  async delete(key: JobKey): Promise<void> {
    this.stmts.del.run(key.namespace, key.appId, key.owner, key.name);
    this.listener?.remove(key);
  }

  async list(ref: JobOwnerRef): Promise<JobRecord[]> {
    return (this.stmts.list.all(ref.namespace, ref.appId, ref.owner) as unknown as Row[]).map(fromRow);
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
  return [k.namespace, k.appId, k.owner, k.name, JSON.stringify(r.spec), r.createdAt, r.gen, r.count, r.nextAt, r.expiresAt ?? null];
}

function fromRow(row: Row): JobRecord {
  return {
    key: { namespace: row.namespace, appId: row.app_id, owner: row.owner, name: row.name },
    spec: JSON.parse(row.spec) as JobSpec,
    createdAt: Number(row.created_at),
    gen: row.gen,
    count: Number(row.count),
    nextAt: row.next_at === null ? null : Number(row.next_at),
    expiresAt: row.expires_at === null ? undefined : Number(row.expires_at),
  };
}
