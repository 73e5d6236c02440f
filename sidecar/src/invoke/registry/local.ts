/**
 * The standalone name-resolution registry: one JSON file per running sidecar in
 * `<rt home>/registry/` (`~/.rt`, or `RT_HOME`), whatever each run's --data-dir. Written when a
 * sidecar listens, removed when it stops; an entry whose process is gone is skipped (and swept).
 * An entry also names its process's PID namespace and start time (Linux): a pid since reused by
 * another process counts as gone, and an entry of another PID namespace (a container that shares
 * rt home, where the sidecar may be pid 1) is neither listed nor swept, since its pid means
 * nothing here.
 * Discovery stays on this machine's files and loopback: no multicast.
 */
import { mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { dirname, join } from 'node:path';
import { rtHome } from '../../../../shared/rt-home.ts';

export interface RegistryEntry {
  appId: string;
  namespace: string;
  /** Host the sidecar's ports answer on (its listen address, 127.0.0.1 for 0.0.0.0). */
  host: string;
  httpPort: number;
  grpcPort: number;
  internalGrpcPort: number;
  /** The internal port's Unix socket, which sidecars of this machine call instead (`unix:<path>`). */
  internalSocket?: string;
  appPort: number;
  appProtocol: string;
  /** The sidecar's process. */
  pid: number;
  /** `rt run`'s process and the app's command, when rt run started it. */
  cliPid?: number;
  command?: string;
  metricsPort?: number;
  startedAt: string;
  /** The process's PID namespace (`pid:[…]`) and start time in clock ticks after boot (Linux). */
  pidNs?: string;
  startTicks?: number;
}

export function registryDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(rtHome(env), 'registry');
}

/** Where a standalone sidecar's internal port listens on a Unix socket too. */
export function socketPath(appId: string, pid: number, port: number, env: NodeJS.ProcessEnv = process.env): string {
  return join(rtHome(env), 'sock', `${safe(appId)}-${pid}-${port}.sock`);
}

/** Whether a process with this pid runs (EPERM: it runs, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's start time in clock ticks after boot (`/proc/<pid>/stat`, Linux); undefined elsewhere or when it is gone. */
function startTicksOf(pid: number | 'self'): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command (field 2) may hold spaces and parentheses: count from its closing one; the state is field 3, the start time field 22
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number.isSafeInteger(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

/** Who a process is beyond its pid, where /proc tells (Linux); undefined elsewhere or when it is gone. */
export function processIdentity(pid: number | 'self'): { pidNs?: string; startTicks: number } | undefined {
  const startTicks = startTicksOf(pid);
  if (startTicks === undefined) return undefined;
  let pidNs: string | undefined;
  try {
    pidNs = readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    // another user's process: its start time still tells a reused pid
  }
  return { pidNs, startTicks };
}

let ownPidNs: string | undefined | null = null;
function pidNamespace(): string | undefined {
  if (ownPidNs === null) ownPidNs = processIdentity('self')?.pidNs;
  return ownPidNs;
}

/** 'foreign': written in another PID namespace, so its pid cannot be checked from here. */
function liveness(e: RegistryEntry): 'alive' | 'dead' | 'foreign' {
  const ns = pidNamespace();
  if (e.pidNs && ns && e.pidNs !== ns) return 'foreign';
  if (!processAlive(e.pid)) return 'dead';
  if (e.startTicks !== undefined) {
    const now = startTicksOf(e.pid);
    if (now !== undefined && now !== e.startTicks) return 'dead'; // the pid is another process's now
  }
  return 'alive';
}

/** Writes (or rewrites) this sidecar's entry; returns a function that removes it. */
export function register(entry: RegistryEntry, dir = registryDir()): { update(e: Partial<RegistryEntry>): void; remove(): void } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (entry.pid === process.pid && entry.startTicks === undefined) {
    const me = processIdentity('self');
    if (me) entry = { ...entry, pidNs: me.pidNs, startTicks: me.startTicks };
  }
  // pid + internal port: several sidecars may run in one process (tests, embedders)
  const file = join(dir, `${safe(entry.appId)}-${entry.pid}-${entry.internalGrpcPort}.json`);
  let current = entry;
  const write = () => {
    // a rename is atomic: a reader never sees half a file, and the folder's mtime moves
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(current, null, 2), { mode: 0o600 });
    renameSync(tmp, file);
  };
  write();
  return {
    update(e) {
      current = { ...current, ...e };
      write();
    },
    remove() {
      rmSync(file, { force: true });
    },
  };
}

/** The entries of running sidecars; files of dead processes are removed on the way. */
export function listEntries(dir = registryDir()): RegistryEntry[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: RegistryEntry[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const path = join(dir, name);
    let e: RegistryEntry;
    try {
      e = JSON.parse(readFileSync(path, 'utf8')) as RegistryEntry;
    } catch {
      continue; // removed meanwhile, or not ours
    }
    if (typeof e.appId !== 'string' || typeof e.pid !== 'number') continue;
    const state = liveness(e);
    if (state === 'foreign') continue;
    if (state === 'dead') {
      rmSync(path, { force: true });
      // a crashed sidecar's socket file — only ever one in rt home's sock folder
      const sock = e.internalSocket;
      if (sock && dirname(sock) === join(dirname(dir), 'sock') && sock.endsWith('.sock')) rmSync(sock, { force: true });
      continue;
    }
    out.push(e);
  }
  return out.sort((a, b) => a.appId.localeCompare(b.appId) || a.startedAt.localeCompare(b.startedAt));
}

/**
 * Lookups for one sidecar, without file reads per call: the folder is watched, and read again
 * only after it changed (an entry added, rewritten or removed) or a call failed; where watching
 * is not possible, its mtime is checked instead. A process that died without removing its file
 * is noticed by a liveness check at most every LIVENESS_MS.
 */
const LIVENESS_MS = 500;

export class LocalRegistry {
  private cache: RegistryEntry[] = [];
  private stale = true;
  private mtime = -1;
  private watcher?: FSWatcher;
  private checkedAt = 0;
  readonly dir: string;
  constructor(dir = registryDir()) {
    this.dir = dir;
  }

  entries(): RegistryEntry[] {
    if (!this.watcher) this.watch();
    if (!this.watcher) {
      let m: number;
      try {
        m = statSync(this.dir).mtimeMs;
      } catch {
        return [];
      }
      if (m !== this.mtime) [this.stale, this.mtime] = [true, m];
    }
    const now = Date.now();
    if (this.stale) {
      this.stale = false;
      this.cache = listEntries(this.dir);
      this.checkedAt = now;
    } else if (now - this.checkedAt > LIVENESS_MS) {
      this.checkedAt = now;
      this.cache = this.cache.filter((e) => liveness(e) === 'alive');
    }
    return this.cache;
  }

  /** Forget the cache (after a call to an address that did not answer). */
  invalidate(): void {
    this.stale = true;
    this.mtime = -1;
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  private watch(): void {
    try {
      // persistent: false — a lookup cache must not keep the process alive
      this.watcher = watch(this.dir, { persistent: false }, () => {
        this.stale = true;
      });
      this.watcher.on('error', () => this.close());
      this.stale = true;
    } catch {
      this.watcher = undefined; // no folder yet: stat until there is one
    }
  }
}

function safe(s: string): string {
  return s.replace(/[^A-Za-z0-9_.-]/g, '_');
}
