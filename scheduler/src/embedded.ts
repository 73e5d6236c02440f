/**
 * The scheduler inside a sidecar's process (standalone default): an engine on a SQLite file
 * per app, reached through an InProcessClient. Starting it costs one file open.
 */
import { join } from 'node:path';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import type { Logger } from 'pino';
import { InProcessClient } from './client.ts';
import { SchedulerEngine } from './engine.ts';
import { SqliteJobStore } from './store/sqlite.ts';

/**
 * One file per app id and namespace: two apps started on one laptop (two `rt run`s sharing
 * ~/.rt/data) never fire each other's jobs.
 */
export function embeddedStorePath(dataDir: string, namespace: string, appId: string): string {
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  // SHA-256 as node:crypto gives it (the same file names), without loading node:crypto at start
  const hash = bytesToHex(sha256(utf8ToBytes(`${namespace}\u0000${appId}`))).slice(0, 8);
  return join(dataDir, 'scheduler', `${safe(namespace)}.${safe(appId)}.${hash}.sqlite`);
}

export async function startEmbeddedEngine(file: string, log: Logger): Promise<SchedulerEngine> {
  const scoped = log.child({ scope: 'rt.scheduler' });
  const engine = new SchedulerEngine({ log: scoped, store: new SqliteJobStore(file, scoped) });
  await engine.start();
  return engine;
}

export async function startInProcessScheduler(opts: { dataDir: string; namespace: string; appId: string; log: Logger }): Promise<InProcessClient> {
  const engine = await startEmbeddedEngine(embeddedStorePath(opts.dataDir, opts.namespace, opts.appId), opts.log);
  return new InProcessClient(engine, true);
}
