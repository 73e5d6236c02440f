/**
 * Who owns the embedded workflow store: an exclusive SQLite lock (a POSIX advisory lock, held by
 * an open connection) on a small file beside it. The kernel drops the lock the moment its
 * holder exits, however it exits (kill -9 included, before the process is even reaped), so a
 * restarted sidecar always gets it back. A pid written in a file could not tell: as PID 1 of a
 * container the restarted sidecar has the dead one's pid, and a zombie still answers kill(pid, 0).
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

/** SQLITE_BUSY: another connection (of this or another process) holds the lock. */
const SQLITE_BUSY = 5;

/**
 * Takes the lock on `path` (created when missing). Returns its release function, or undefined
 * when a live holder has it. Never waits.
 */
export async function tryLockFile(path: string): Promise<(() => void) | undefined> {
  const { DatabaseSync } = await import('node:sqlite');
  mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path, { timeout: 0 });
  try {
    // MEMORY journal: the held transaction leaves no journal file behind a kill -9
    db.exec('PRAGMA journal_mode=MEMORY; PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE');
  } catch (e) {
    db.close();
    if ((e as { errcode?: number }).errcode === SQLITE_BUSY) return undefined;
    throw e;
  }
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    db.close(); // rolls back the empty transaction and unlocks
  };
}

/**
 * Takes the lock, waiting up to `waitMs` while it is busy. A holder that was just killed can
 * keep its files (and so its lock) a little longer than its process lasts, e.g. while it is a
 * zombie PID 1; a restarted sidecar must not take that for another live sidecar.
 */
export async function lockFileWithin(path: string, waitMs: number, onWait?: () => void): Promise<(() => void) | undefined> {
  const deadline = Date.now() + waitMs;
  for (let first = true; ; first = false) {
    const release = await tryLockFile(path);
    if (release || Date.now() >= deadline) return release;
    if (first) onWait?.();
    await new Promise((r) => setTimeout(r, 100));
  }
}
