/**
 * Where the tests find Redis: RT_TEST_REDIS_URL (redis://[user:pass@]host:port[/db]). When it is
 * not set, the vitest global setup (test/services/global-setup.ts) starts a private
 * `redis-server` from Debian's package on a free loopback port and sets it; `redisTarget()`
 * says whether it answers.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canConnect, freePort } from './net.ts';
import { startServerProcess, type StartedServer } from './server-process.ts';

export interface RedisTarget {
  host: string;
  port: number;
  username?: string;
  password?: string;
  db: number;
  /** host:port as component metadata `redisHost` wants it. */
  redisHost: string;
  available: boolean;
  url: string;
}

export const REDIS_BIN = process.env.RT_TEST_REDIS_BIN || '/usr/bin/redis-server';

export async function redisTarget(): Promise<RedisTarget> {
  const url = process.env.RT_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(u.port || 6379);
  const db = Number(u.pathname.replace('/', '') || 0);
  return {
    host,
    port,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db,
    redisHost: `${host.includes(':') ? `[${host}]` : host}:${port}`,
    available: await canConnect(host, port),
    url,
  };
}

/** Component metadata for a state.redis / pubsub.redis pointing at the target. */
export function redisMetadata(t: RedisTarget): Record<string, string> {
  const md: Record<string, string> = { redisHost: t.redisHost, redisDB: String(t.db) };
  if (t.username) md.redisUsername = t.username;
  if (t.password) md.redisPassword = t.password;
  return md;
}

/**
 * Starts a private, non-persistent redis-server on a free loopback port. Throws with the
 * server's own words when it cannot start; the caller decides whether that fails the run.
 */
export async function startRedis(): Promise<StartedServer> {
  if (!existsSync(REDIS_BIN)) throw new Error(`${REDIS_BIN} not found (Debian package redis-server)`);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rt-redis-'));
  return startServerProcess({
    name: 'redis-server',
    command: REDIS_BIN,
    // no RDB/AOF: a test server keeps nothing across runs
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning'],
    port,
    dirs: [dir],
    url: `redis://127.0.0.1:${port}`,
  });
}
