/**
 * Where the tests find Redis: RT_TEST_REDIS_URL (redis://[user:pass@]host:port[/db]) or the
 * machine's 127.0.0.1:6379. `redisTarget()` says whether it answers.
 */
import { canConnect } from './net.ts';

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
