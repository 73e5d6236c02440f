/**
 * Start-to-healthz time and idle memory of the sidecar: the compiled build (`node dist/cli/rt.js`,
 * what the rt image runs) beside the TypeScript sources (`node cli/rt.ts`, type stripping at
 * start). Anchor: bare `node -e` that opens an HTTP port and answers 204.
 * Runs `npm run build` first when dist/ is missing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { machineLine, printTable, ratio, rssMb, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';

const ROOT = join(import.meta.dirname, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const IDLE_MS = 2000;

interface Sample {
  readyMs: number;
  rssMb: number;
}

async function once(args: (port: number, dataDir: string) => Promise<string[]>): Promise<Sample> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rt-bench-startup-'));
  const port = await freePort();
  const argv = await args(port, dataDir);
  const t0 = performance.now();
  const proc: ChildProcess = spawn(process.execPath, argv, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    const url = `http://127.0.0.1:${port}/v1.0/healthz`;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`${argv.join(' ')} exited with ${proc.exitCode}`);
      try {
        if ((await fetch(url)).status === 204) break;
      } catch {
        // not listening yet
      }
      if (performance.now() - t0 > 30_000) throw new Error(`${url} not ready after 30 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
    const readyMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return { readyMs, rssMb: rssMb(proc.pid!) };
  } finally {
    proc.kill('SIGTERM');
    if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(args: (port: number, dataDir: string) => Promise<string[]>): Promise<Sample> {
  const samples: Sample[] = [];
  for (let i = 0; i < ROUNDS; i++) samples.push(await once(args));
  return { readyMs: median(samples.map((s) => s.readyMs)), rssMb: median(samples.map((s) => s.rssMb)) };
}

const sidecarArgs = async (port: number, dataDir: string) => [
  'sidecar', '--app-id', 'bench', '--http-port', String(port), '--grpc-port', String(await freePort()),
  '--disable-metrics', '--data-dir', dataDir, '--log-level', 'warn',
];

if (!existsSync(join(ROOT, 'dist', 'cli', 'rt.js'))) {
  const built = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) process.exit(1);
}

console.log(machineLine());
const anchor = await measure(async (port) => ['-e', `require('http').createServer((q, s) => { s.statusCode = 204; s.end(); }).listen(${port}, '127.0.0.1')`]);
const sources = await measure(async (port, dataDir) => ['cli/rt.ts', ...(await sidecarArgs(port, dataDir))]);
const compiled = await measure(async (port, dataDir) => ['dist/cli/rt.js', ...(await sidecarArgs(port, dataDir))]);

const row = (name: string, s: Sample): Row => ({
  process: name,
  'start → healthz ms': s.readyMs,
  'idle RSS MB': s.rssMb,
  'vs anchor (time)': ratio(s.readyMs, anchor.readyMs),
  'vs anchor (RSS)': ratio(s.rssMb, anchor.rssMb),
  'vs sources (time)': ratio(s.readyMs, sources.readyMs),
  'vs sources (RSS)': ratio(s.rssMb, sources.rssMb),
});
printTable(`sidecar start, no components, median of ${ROUNDS} (RSS ${IDLE_MS / 1000} s after ready); anchor = bare node -e opening a port`, [
  row('anchor: node -e, HTTP 204', anchor),
  row('rt sidecar from sources (node cli/rt.ts)', sources),
  row('rt sidecar compiled (node dist/cli/rt.js)', compiled),
]);
