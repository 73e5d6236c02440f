/**
 * What a killed test run leaves in the temp folder: its servers' folders (`rt-postgres-*`,
 * `rt-redis-*`) and its RT_HOME (`rt-test-home-*`). Each gets an owner file naming the process
 * that uses it (with its start time, so a reused pid does not count) and the server running in it.
 * The next run's global setup removes every such folder whose owner is gone, after stopping the
 * server still running there (by its pid and start time: Redis rewrites its command line).
 */
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const OWNER_FILE = '.rt-owner';
/** The temp folders the suites make and mark. */
const SWEPT = /^rt-(postgres|redis|test-home)-/;
/** A folder of these names without an owner file (made by an older checkout) is left this long. */
const UNMARKED_GRACE_MS = 3 * 3600_000;

/** The kernel's start time of a process (clock ticks since boot), or undefined when it is gone. */
function startTime(pid: number): string | undefined {
  try {
    // the command name (field 2) may hold spaces and parentheses: count fields after its ')'
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Marks `dir` as in use by this process (and `serverPid`, the server running in it, if any). */
export function markOwner(dir: string, serverPid?: number): void {
  const server = serverPid === undefined ? {} : { serverPid, serverStart: startTime(serverPid) };
  writeFileSync(join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, start: startTime(process.pid), ...server }));
}

interface Owner {
  pid: number;
  start?: string;
  serverPid?: number;
  serverStart?: string;
}

/** Removes the marked folders of dead runs; says what it removed. */
export function sweepTempLeftovers(say: (line: string) => void, root = tmpdir(), now = Date.now()): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    if (!SWEPT.test(name)) continue;
    const dir = join(root, name);
    try {
      const ownerFile = join(dir, OWNER_FILE);
      if (!existsSync(ownerFile)) {
        if (now - statSync(dir).mtimeMs < UNMARKED_GRACE_MS) continue;
      } else {
        const owner = JSON.parse(readFileSync(ownerFile, 'utf8')) as Owner;
        if (startTime(owner.pid) === owner.start) continue;
        // PostgreSQL's own processes end once their postmaster is gone
        if (owner.serverPid !== undefined && startTime(owner.serverPid) === owner.serverStart) process.kill(owner.serverPid, 'SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch (e) {
      say(`could not sweep ${dir}: ${(e as Error).message}`);
    }
  }
  if (removed.length > 0) say(`removed what killed runs left: ${removed.join(', ')}`);
  return removed;
}
