/**
 * Shared pieces of the configuration tests: a Redis database of their own (a "every key" get or
 * subscription must not see other suites' keys), and PostgreSQL tables with the trigger that
 * notifies changes as docs/configuration.md shows it.
 */
import { randomBytes } from 'node:crypto';
import type { PostgresTarget } from '../services/postgres.ts';
import { redisMetadata, type RedisTarget } from '../services/redis.ts';

/** A database number other suites do not use (they stay on the target's own). */
export function configurationRedisMetadata(t: RedisTarget, db = 9 + (process.pid % 6)): Record<string, string> {
  return { ...redisMetadata(t), redisDB: String(db) };
}

export async function redisClient(t: RedisTarget, db: number) {
  const { Redis } = await import('ioredis');
  const c = new Redis({ host: t.host, port: t.port, username: t.username, password: t.password, db, lazyConnect: true });
  await c.connect();
  return c;
}

export interface ConfigTable {
  table: string;
  channel: string;
  query(text: string, values?: unknown[]): Promise<unknown>;
  /** Sets a key's value and version (one row per key). */
  set(key: string, value: string, version: string, metadata?: Record<string, string>): Promise<void>;
  del(key: string): Promise<void>;
  drop(): Promise<void>;
}

/** A fresh table of the reference's shape with its notify trigger on its own channel. */
export async function configTable(t: PostgresTarget): Promise<ConfigTable> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: t.url });
  await c.connect();
  const suffix = randomBytes(4).toString('hex');
  const table = `rt_cfg_${suffix}`;
  const channel = `rt_cfg_ch_${suffix}`;
  await c.query(`CREATE TABLE ${table} (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL, version TEXT NOT NULL, metadata JSON)`);
  await c.query(`CREATE FUNCTION ${table}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      row_data json;
    BEGIN
      IF TG_OP = 'DELETE' THEN row_data := row_to_json(OLD); ELSE row_data := row_to_json(NEW); END IF;
      PERFORM pg_notify('${channel}', json_build_object('table', TG_TABLE_NAME, 'action', TG_OP, 'data', row_data)::text);
      RETURN NULL;
    END $$`);
  await c.query(`CREATE TRIGGER ${table}_changed AFTER INSERT OR UPDATE OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_notify()`);
  return {
    table,
    channel,
    query: (text, values) => c.query(text, values),
    set: async (key, value, version, metadata) => {
      await c.query(`INSERT INTO ${table} (key, value, version, metadata) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version, metadata = EXCLUDED.metadata`, [key, value, version, metadata ? JSON.stringify(metadata) : null]);
    },
    del: async (key) => {
      await c.query(`DELETE FROM ${table} WHERE key = $1`, [key]);
    },
    drop: async () => {
      try {
        await c.query(`DROP TABLE IF EXISTS ${table}`);
        await c.query(`DROP FUNCTION IF EXISTS ${table}_notify()`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Resolves once `check` holds, polling; rejects with `what` after `ms`. */
export async function eventually(check: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
