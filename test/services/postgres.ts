/**
 * Where the tests find PostgreSQL: RT_TEST_POSTGRES_URL or the machine's
 * postgres://postgres@127.0.0.1:5432/test. `postgresTarget()` says whether it answers.
 */
import { canConnect } from './net.ts';

export interface PostgresTarget {
  url: string;
  host: string;
  port: number;
  available: boolean;
}

export async function postgresTarget(): Promise<PostgresTarget> {
  const url = process.env.RT_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(u.port || 5432);
  return { url, host, port, available: await canConnect(host, port) };
}

/** Drops a state.postgresql table and what the store creates with it (sequence, JSON function). */
export async function dropStateTables(url: string, tables: string[]): Promise<void> {
  if (tables.length === 0) return;
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const t of tables) {
      await c.query(`DROP TABLE IF EXISTS "${t}"`);
      await c.query(`DROP SEQUENCE IF EXISTS "${t}_etag_seq"`);
      await c.query(`DROP FUNCTION IF EXISTS "${t}_jsonb"(bytea)`);
    }
  } finally {
    await c.end();
  }
}
