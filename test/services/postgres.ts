/**
 * Where the tests find PostgreSQL: RT_TEST_POSTGRES_URL. When it is not set, the vitest global
 * setup (test/services/global-setup.ts) starts a private server from Debian's `postgresql`
 * binaries: `initdb` into a temp dir (trust on loopback), a free loopback port, and a `test`
 * database. `postgresTarget()` says whether it answers.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { canConnect, freePort } from './net.ts';
import { startServerProcess, type StartedServer } from './server-process.ts';

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

/** The newest PostgreSQL server binaries folder (Debian puts them in /usr/lib/postgresql/<major>/bin). */
export function postgresBinDir(): string | undefined {
  if (process.env.RT_TEST_POSTGRES_BIN_DIR) return process.env.RT_TEST_POSTGRES_BIN_DIR;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))).sort((a, b) => Number(b) - Number(a));
  return majors.length ? join(root, majors[0], 'bin') : undefined;
}

/** PostgreSQL refuses to run as root: as root, run it as the package's `postgres` account. */
function serverAccount(): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error('running as root, and there is no `postgres` account to run PostgreSQL as (Debian package postgresql creates it)');
  }
}

/**
 * Starts a private PostgreSQL on a free loopback port with a fresh cluster and a `test`
 * database; `url` points at that database as user `postgres`. Durability is off (fsync), as a
 * test server keeps nothing across runs.
 */
export async function startPostgres(): Promise<StartedServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (Debian package postgresql)');
  const account = serverAccount();
  const dir = mkdtempSync(join(tmpdir(), 'rt-postgres-'));
  const data = join(dir, 'data');
  mkdirSync(data);
  if (account) {
    chownSync(dir, account.uid, account.gid);
    chownSync(data, account.uid, account.gid);
  }
  try {
    execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], {
      ...account,
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${String((e as { stderr?: Buffer }).stderr ?? e).trim().slice(-800)}`);
  }
  const port = await freePort();
  const server = await startServerProcess({
    name: 'postgres',
    command: join(bin, 'postgres'),
    args: ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
    port,
    dirs: [dir],
    spawnOptions: { ...account, cwd: dir },
    // SIGINT is PostgreSQL's "fast" shutdown: ends sessions and stops at once
    stopSignal: 'SIGINT',
    url: `postgres://postgres@127.0.0.1:${port}/test`,
  });
  try {
    await createTestDatabase(`postgres://postgres@127.0.0.1:${port}/postgres`);
  } catch (e) {
    await server.stop();
    throw e;
  }
  return server;
}

/** The port accepts connections a moment before the server takes sessions: retry briefly. */
async function createTestDatabase(adminUrl: string): Promise<void> {
  const { default: pg } = await import('pg');
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = new pg.Client({ connectionString: adminUrl });
    try {
      await c.connect();
      await c.query('CREATE DATABASE test');
      return;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`PostgreSQL did not take the test database: ${(e as Error).message}`);
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await c.end().catch(() => {});
    }
  }
}
