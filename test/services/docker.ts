/**
 * A real Docker engine for tests and `npm run image`: Debian's `dockerd` (package docker.io),
 * started by us with its own socket and exec root, no bridge and no iptables (builds and
 * containers use the host network). Or the engine at DOCKER_HOST when that is set.
 *
 * The data root is a cache folder reused across runs (built layers survive, so a rebuild with no
 * change takes seconds). Only one dockerd may use a data root, so suites running in parallel
 * SHARE one engine: each caller registers itself under `users/`, and the last one to stop it
 * ends dockerd and removes what it leaves (mounts under the exec root, the run folder). A short
 * mkdir lock guards those steps.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import type { Readable } from 'node:stream';

export interface DockerResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface DockerRunOptions {
  /** Written to the command's stdin. */
  input?: string | Buffer;
  /** Folder to run in (build contexts). */
  cwd?: string;
  /** Fail (reject) when the command exits non-zero; default false. */
  check?: boolean;
  timeoutMs?: number;
  /** Receives the command's stdout as a stream instead of collecting it (e.g. `docker save`). */
  onStdout?: (stream: Readable) => void;
  /** How much of stderr's end is kept (default 20,000 characters). */
  stderrLimit?: number;
}

export interface Docker {
  /** For DOCKER_HOST: unix:///…/docker.sock */
  host: string;
  socket: string;
  /** The docker CLI against this engine. */
  docker(args: string[], opts?: DockerRunOptions): Promise<DockerResult>;
  stop(): Promise<void>;
}

const DOCKERD = ['/usr/sbin/dockerd', '/usr/bin/dockerd'].find((p) => existsSync(p));
/** The CLI of the same Debian package speaks the engine's API version; another one may not. */
const DOCKER_CLI = ['/usr/bin/docker', '/usr/local/bin/docker'].find((p) => existsSync(p)) ?? 'docker';

const CACHE = process.env.RT_DOCKER_CACHE || join(homedir(), '.cache', 'rt-docker');
/** Socket paths must stay short (108 bytes), so the run folder lives in /tmp. */
const RUN = process.env.RT_DOCKER_RUN || '/tmp/rt-docker';
const SOCKET = join(RUN, 'docker.sock');
const EXEC_ROOT = join(RUN, 'exec');
const PIDFILE = join(RUN, 'dockerd.pid');
const USERS = join(RUN, 'users');
const LOCK = join(RUN, 'lock');
/** Kept in the cache folder: the last engine's log, for a failure seen after the fact. */
const LOG = join(CACHE, 'dockerd.log');

/** Why no engine can be had here, or '' when one can (for requireService). */
export function dockerMissing(): string {
  if (process.env.DOCKER_HOST) return '';
  if (!DOCKERD) return 'dockerd not found (install the docker.io package, or set DOCKER_HOST)';
  if (process.getuid?.() !== 0) return 'starting dockerd needs root (or set DOCKER_HOST)';
  return '';
}

export function dockerCli(host: string, args: string[], opts: DockerRunOptions = {}): Promise<DockerResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(DOCKER_CLI, args, {
      cwd: opts.cwd,
      // the classic builder: the Debian engine's BuildKit needs the buildx plugin the CLI lacks
      env: { ...process.env, DOCKER_HOST: host, DOCKER_BUILDKIT: '0', DOCKER_CLI_HINTS: 'false' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    if (opts.onStdout) opts.onStdout(child.stdout);
    else child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-(opts.stderrLimit ?? 20_000))));
    const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs) : undefined;
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const result = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if (opts.check && result.code !== 0) {
        reject(new Error(`docker ${args.slice(0, 3).join(' ')} failed (${result.code}${signal ? `, ${signal}` : ''}): ${(stdout.slice(-3000) + stderr.slice(-2000)).trim()}`));
      } else resolve(result);
    });
    child.stdin.end(opts.input);
  });
}

/** The engine answers GET /_ping on its socket. */
function ping(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: socket, path: '/_ping', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('error', () => resolve(false));
    req.once('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `fn` holding a lock between processes. mkdir is atomic: the lock is a folder holding its
 * owner's pid; the lock of an owner that died is taken over.
 */
export async function withDirLock<T>(lock: string, fn: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(dirname(lock), { recursive: true });
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch {
      const owner = Number(readFileIfAny(join(lock, 'pid')));
      if (owner && !alive(owner)) rmSync(lock, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`${lock} is held by pid ${owner || '?'} for ${timeoutMs / 1000} s`);
      else await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** The engine lock; the run folder goes with it once nothing runs and nobody waits. */
async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await withDirLock(LOCK, fn);
  } finally {
    try {
      rmdirSync(RUN); // only when empty
    } catch {
      // still in use
    }
  }
}

function readFileIfAny(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Registered users whose process still lives (entries of dead ones are removed). */
function liveUsers(): string[] {
  mkdirSync(USERS, { recursive: true });
  return readdirSync(USERS).filter((name) => {
    if (alive(Number(name.split('-')[0]))) return true;
    rmSync(join(USERS, name), { force: true });
    return false;
  });
}

/** Mount points at or below `root`, deepest first (from /proc/self/mountinfo). */
function mountsUnder(root: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => !!p && (p === root || p.startsWith(root + '/')))
    .map((p) => p.replace(/\\040/g, ' '))
    .sort((a, b) => b.length - a.length);
}

function run(cmd: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    c.once('error', () => resolve(1));
    c.once('exit', (code) => resolve(code ?? 1));
  });
}

/** What a dockerd that died hard leaves: mounts (nsfs, overlays, shm) and the run folder. */
async function removeLeftovers(): Promise<void> {
  for (const m of [...mountsUnder(EXEC_ROOT), ...mountsUnder(join(CACHE, 'data'))]) await run('umount', ['-l', m]);
  rmSync(EXEC_ROOT, { recursive: true, force: true });
  rmSync(SOCKET, { force: true });
  rmSync(PIDFILE, { force: true });
}

async function stopEngine(pid: number): Promise<void> {
  if (pid && alive(pid)) {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 20_000;
    while (alive(pid) && Date.now() < deadline) await sleep(100);
    if (alive(pid)) process.kill(pid, 'SIGKILL');
    while (alive(pid)) await sleep(50);
  }
  // the containerd that dockerd manages exits with it; a SIGKILLed dockerd leaves it running
  const containerdPid = Number(readFileIfAny(join(EXEC_ROOT, 'containerd', 'containerd.pid')));
  if (containerdPid && alive(containerdPid)) {
    process.kill(containerdPid, 'SIGKILL');
    while (alive(containerdPid)) await sleep(50);
  }
  await removeLeftovers();
}

async function startEngine(): Promise<number> {
  await removeLeftovers();
  mkdirSync(join(CACHE, 'data'), { recursive: true });
  mkdirSync(EXEC_ROOT, { recursive: true });
  const log = openSync(LOG, 'w');
  const proc = spawn(
    DOCKERD!,
    [
      '--host', `unix://${SOCKET}`,
      '--data-root', join(CACHE, 'data'),
      '--exec-root', EXEC_ROOT,
      '--pidfile', PIDFILE,
      // no bridge, no NAT: builds and containers use the host network (--network host)
      '--bridge=none', '--iptables=false', '--ip6tables=false', '--ip-forward=false', '--ip-masq=false',
      '--log-level', 'warn',
    ],
    // its own process group: it serves every suite that shares it, not only the one that started it
    { detached: true, stdio: ['ignore', log, log] },
  );
  closeSync(log);
  proc.unref();
  const pid = proc.pid!;
  const deadline = Date.now() + 60_000;
  while (!(await ping(SOCKET))) {
    if (!alive(pid) || Date.now() > deadline) {
      await stopEngine(pid);
      throw new Error(`dockerd did not start: ${readFileIfAny(LOG).slice(-1500)}`);
    }
    await sleep(200);
  }
  return pid;
}

/**
 * The engine at DOCKER_HOST, or our shared private dockerd (started when no other suite runs it).
 * Throws when it cannot start; check `dockerMissing()` first for a skip/fail decision.
 */
export async function startDocker(): Promise<Docker> {
  const fromEnv = process.env.DOCKER_HOST;
  if (fromEnv) {
    const socket = fromEnv.startsWith('unix://') ? fromEnv.slice('unix://'.length) : '';
    return { host: fromEnv, socket, docker: (a, o) => dockerCli(fromEnv, a, o), stop: async () => {} };
  }
  const missing = dockerMissing();
  if (missing) throw new Error(missing);
  const me = `${process.pid}-${randomUUID().slice(0, 8)}`;
  await withLock(async () => {
    const users = liveUsers();
    const pid = Number(readFileIfAny(PIDFILE));
    const running = pid > 0 && alive(pid) && (await ping(SOCKET));
    if (!running) {
      if (users.length) console.warn(`docker: the shared dockerd is gone; restarting it (users: ${users.join(', ')})`);
      await stopEngine(pid);
      await startEngine();
    }
    writeFileSync(join(USERS, me), '');
  });
  const host = `unix://${SOCKET}`;
  let stopped = false;
  return {
    host,
    socket: SOCKET,
    docker: (args, opts) => dockerCli(host, args, opts),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await withLock(async () => {
        rmSync(join(USERS, me), { force: true });
        if (liveUsers().length === 0) await endEngine();
      });
    },
  };
}

/** Stops the engine and empties the run folder (the lock inside it is released by withLock). Held lock. */
async function endEngine(): Promise<boolean> {
  const pid = Number(readFileIfAny(PIDFILE));
  const running = pid > 0 && alive(pid);
  await stopEngine(pid);
  for (const entry of readdirSync(RUN)) if (join(RUN, entry) !== LOCK) rmSync(join(RUN, entry), { recursive: true, force: true });
  return running;
}

/**
 * Ends our private dockerd when no live process uses it any more: for a global teardown, after
 * suites that may have died before their own `stop()`. Returns whether one was stopped.
 */
export async function stopDockerIfUnused(): Promise<boolean> {
  if (!existsSync(RUN)) return false;
  return withLock(async () => {
    if (liveUsers().length) return false;
    return endEngine();
  });
}
