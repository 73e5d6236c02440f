/**
 * Shared pieces of the benchmarks: an HTTP load generator (closed loop at fixed concurrency,
 * or open loop at a fixed rate), percentiles, child processes to measure, and the table every
 * benchmark prints with its anchor side by side.
 *
 * The load generator runs in the benchmark's own process; whatever is measured runs in a child
 * process, so the two do not share an event loop.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { Pool } from 'undici';

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Fixed headers, or ones made per request (e.g. a fresh token each time). */
  headers?: Record<string, string> | ((i: number) => Record<string, string>);
  /** A fixed body, or one made per request (i = request number). */
  body?: string | Buffer | ((i: number) => string | Buffer);
  /** Concurrent requests in flight (closed loop). Default 32. */
  concurrency?: number;
  /** How long to run. Default 5 s. */
  durationMs?: number;
  /** Open loop: send at this many requests per second instead of as fast as possible. */
  rate?: number;
  /** Statuses that count as success; default 2xx. */
  ok?: (status: number) => boolean;
}

export interface LoadResult {
  requests: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

/** CPU ms (user + system) a process has used so far, from /proc (Linux). */
export function procCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** Drives one URL and reports throughput and latency percentiles. */
export async function load(opts: LoadOptions): Promise<LoadResult> {
  const u = new URL(opts.url);
  const concurrency = opts.concurrency ?? 32;
  const pool = new Pool(u.origin, { connections: concurrency, pipelining: 1 });
  const durationMs = opts.durationMs ?? 5000;
  const ok = opts.ok ?? ((s: number) => s >= 200 && s < 300);
  const path = u.pathname + u.search;
  const lat: number[] = [];
  let errors = 0;
  let n = 0;
  const one = async () => {
    const i = n++;
    const body = typeof opts.body === 'function' ? opts.body(i) : opts.body;
    const headers = typeof opts.headers === 'function' ? opts.headers(i) : opts.headers;
    const t0 = performance.now();
    try {
      const res = await pool.request({ method: opts.method ?? 'GET', path, headers, body });
      await res.body.dump();
      if (!ok(res.statusCode)) errors++;
    } catch {
      errors++;
    }
    lat.push(performance.now() - t0);
  };
  const start = performance.now();
  const end = start + durationMs;
  if (opts.rate) {
    const interval = 1000 / opts.rate;
    const inflight = new Set<Promise<void>>();
    let next = start;
    while (performance.now() < end) {
      const now = performance.now();
      while (next <= now) {
        const p = one().finally(() => inflight.delete(p));
        inflight.add(p);
        next += interval;
      }
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(5, next - performance.now()))));
    }
    await Promise.all(inflight);
  } else {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) await one();
      }),
    );
  }
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  return { requests: lat.length, errors, rps: lat.length / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
}

export interface ClosedLoopResult {
  /** Operations run (ok or not). */
  count: number;
  errors: number;
  /** Operations that went well, per second. */
  perSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** `concurrency` workers, each running `op` one after another for `durationMs`; `op` says whether it went well. */
export async function closedLoop(op: (worker: number, i: number) => Promise<boolean>, concurrency: number, durationMs: number): Promise<ClosedLoopResult> {
  const lat: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = 0; performance.now() < end; i++) {
        const t0 = performance.now();
        const ok = await op(w, i).catch(() => false);
        if (!ok) errors++;
        lat.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  return { count: lat.length, errors, perSec: (lat.length - errors) / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
}

/** Several runs as one: counts summed, rates and latencies their medians. */
export function medianRun(runs: ClosedLoopResult[]): ClosedLoopResult {
  return {
    count: runs.reduce((n, r) => n + r.count, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    perSec: median(runs.map((r) => r.perSec)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
  };
}

/** The p-th percentile of an ascending array (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** The middle value (the upper one of an even count). */
export function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

/** The item whose key is the median of the keys (of repeated runs, the one to report). */
export function medianBy<T>(items: T[], key: (t: T) => number): T {
  const m = median(items.map(key));
  return items.find((t) => key(t) === m)!;
}

/**
 * Runs two measurements alternately (a, b, a, b, …), `rounds` times each, and keeps the run of
 * each with the median req/s, so that a burst of load from elsewhere does not land on one side
 * only; also the median of the rounds' a ÷ b req/s (a round's two runs share the machine's load
 * of the moment, so on a busy machine that ratio is steadier than the ratio of the medians).
 */
export async function alternating(a: () => Promise<LoadResult>, b: () => Promise<LoadResult>, rounds: number): Promise<[LoadResult, LoadResult, number]> {
  const ra: LoadResult[] = [];
  const rb: LoadResult[] = [];
  for (let i = 0; i < rounds; i++) {
    ra.push(await a());
    rb.push(await b());
  }
  return [medianBy(ra, (r) => r.rps), medianBy(rb, (r) => r.rps), median(ra.map((r, i) => r.rps / rb[i].rps))];
}

/** Repeated runs summed up: their requests and errors added, the medians of their req/s, p50 and p99. */
export function medianOfRuns(runs: LoadResult[]): LoadResult {
  return {
    requests: runs.reduce((n, r) => n + r.requests, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    rps: median(runs.map((r) => r.rps)),
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
  };
}

/** Resident memory of a process in MB (Linux /proc). */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

export interface Child {
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a child process (e.g. `node cli/rt.ts sidecar ...`) and waits until `readyUrl`
 * answers (any status), so the benchmark measures a warm server.
 */
export async function startChild(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; readyUrl?: string; timeoutMs?: number } = {}): Promise<Child> {
  const proc = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'ignore', 'inherit'] });
  const stop = async () => {
    if (proc.exitCode !== null) return;
    proc.kill('SIGTERM');
    await new Promise<void>((r) => {
      const t = setTimeout(() => {
        proc.kill('SIGKILL');
        r();
      }, 5000);
      proc.once('exit', () => {
        clearTimeout(t);
        r();
      });
    });
  };
  if (opts.readyUrl) {
    const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
    for (;;) {
      try {
        await fetch(opts.readyUrl);
        break;
      } catch {
        if (Date.now() > deadline || proc.exitCode !== null) {
          await stop();
          throw new Error(`${cmd} ${args.join(' ')} did not become ready at ${opts.readyUrl}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  return { proc, stop };
}

export type Row = Record<string, string | number>;

/** Prints a titled markdown table (numbers rounded) so results paste into bench/README.md. */
export function printTable(title: string, rows: Row[]): void {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const fmt = (v: string | number | undefined) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 0)) : (v ?? ''));
  console.log(`\n### ${title}\n`);
  console.log(`| ${cols.join(' | ')} |`);
  console.log(`| ${cols.map(() => '---').join(' | ')} |`);
  for (const r of rows) console.log(`| ${cols.map((c) => fmt(r[c])).join(' | ')} |`);
}

/** "0.83×" — a measured value against its anchor. */
export function ratio(value: number, anchor: number): string {
  return `${(value / anchor).toFixed(2)}×`;
}

/**
 * A temp folder with a path about as short as the image's /app: Node resolves the path of the
 * main file before any line of rt runs, and from a longer one (/tmp/rt-bench-startup-build-XXXXXX/…)
 * that runs one of its path functions hot enough for Maglev to compile it before cli/rt.ts can
 * switch Maglev off: 1.5 MB of idle RSS that the image does not have (bench/README.md `### startup`).
 */
export function shortTempDir(): string {
  return mkdtempSync(join(tmpdir(), 'r'));
}

/** One line naming the machine, printed by every benchmark. */
/** The 1, 5 and 15 minute load averages, as the closed-loop benchmarks print them before and after a run. */
export function loadLine(): string {
  return loadavg().map((l) => l.toFixed(1)).join(', ');
}

/**
 * A closed-loop benchmark's settings (BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_ROUNDS), after
 * printing the machine and its load before the run.
 */
export function closedLoopSettings(): { seconds: number; concurrency: number; rounds: number; durationMs: number } {
  console.log(machineLine());
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  console.log(`load average before the run: ${loadLine()} (other work on this machine skews the figures)`);
  return { seconds, concurrency, rounds, durationMs: seconds * 1000 };
}

export function machineLine(): string {
  const c = cpus();
  return `machine: ${c.length} × ${c[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`;
}

/**
 * Builds the compiled `rt` (the esbuild bundle the image runs, `npm run build`) from the current
 * sources into `<dir>/dist`, with the repo's node_modules beside it as in the image, and
 * returns its entry. Benchmarks of memory measure this, not the TypeScript sources: type
 * stripping and ~1,000 unbundled modules add ~50 MB to a sidecar (bench/README.md `### startup`).
 * Those that measure idle memory build into shortTempDir().
 */
export function buildRt(dir: string): string {
  const root = join(import.meta.dirname, '..');
  const out = join(dir, 'dist');
  for (const script of ['images/bundle.ts', 'images/dist-assets.ts']) {
    const r = spawnSync(process.execPath, [script, out], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`${script} failed`);
  }
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  // the compile cache, filled as `npm run build` and the image do (cli/compile-cache.ts)
  const warm = spawnSync(process.execPath, ['images/rt/warm-compile-cache.ts', out], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  if (warm.status !== 0) throw new Error('images/rt/warm-compile-cache.ts failed');
  return join(out, 'cli', 'rt.js');
}
