/**
 * State GET/SET through a pluggable state store (examples/pluggable-state, its own process on a
 * Unix socket) against the same kind of store built in (state.in-memory), all behind one
 * `rt sidecar` child process, driven over its HTTP API. Target: pluggable ≥ 0.60× of built-in (issue 15).
 * When Redis answers (RT_TEST_REDIS_URL; `npm run bench` starts one), built-in state.redis is measured too: a built-in store
 * that also pays a round trip to another process per call.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRt, load, machineLine, median, printTable, procCpuMs, ratio, startChild, type LoadResult, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';
import { redisTarget } from '../test/services/redis.ts';

const root = join(import.meta.dirname, '..');
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONCURRENCY = 32;
const redis = await redisTarget();
const withRedis = redis.available;
const redisPrefix = `rtbench-${randomBytes(4).toString('hex')}`;

const dir = mkdtempSync(join(tmpdir(), 'rtbench-pl-'));
// the compiled rt, as the image runs it (bench/lib.ts buildRt; BENCH_SOURCES=1: the TypeScript sources)
const RT = process.env.BENCH_SOURCES === '1' ? fileURLToPath(new URL('../cli/rt.ts', import.meta.url)) : buildRt(join(dir, 'b'));
const sockets = join(dir, 's');
const resources = join(dir, 'r');
mkdirSync(sockets);
mkdirSync(resources);
const component = (name: string, type: string, metadata: Record<string, string> = {}) =>
  `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:\n` +
  Object.entries(metadata)
    .map(([k, v]) => `  - name: ${k}\n    value: "${v}"\n`)
    .join('');
writeFileSync(
  join(resources, 'components.yaml'),
  [
    component('builtin', 'state.in-memory'),
    component('pluggable', 'state.memstore'),
    ...(withRedis ? [component('redis', 'state.redis', { redisHost: redis.redisHost, keyPrefix: redisPrefix })] : []),
  ].join('---\n'),
);

console.log(machineLine());
// the machine may be shared: say how busy it was, since both sides suffer from it unequally
const loadAvg = () => loadavg().map((l) => l.toFixed(1)).join(' ');
console.log(`load average at start: ${loadAvg()}`);
// BENCH_CPU_PROF=<dir> writes the sidecar's and the component's CPU profiles there (node --cpu-prof)
const prof = (name: string) => (process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF, '--cpu-prof-name', `pluggable-${name}-${Date.now()}.cpuprofile`] : []);
const proc = await startChild(process.execPath, [...prof('component'), join(root, 'examples/pluggable-state/main.ts'), '--folder', sockets, '--name', 'memstore']);
for (let i = 0; i < 100 && !existsSync(join(sockets, 'memstore.sock')); i++) await new Promise((r) => setTimeout(r, 100));
const httpPort = await freePort();
const sidecar = await startChild(
  process.execPath,
  [...prof('sidecar'), RT, 'sidecar', '--app-id', 'bench', '--http-port', String(httpPort), '--grpc-port', String(await freePort()), '--resources-path', resources, '--data-dir', join(dir, 'd'), '--log-level', 'warn'],
  { env: { RT_COMPONENTS_SOCKETS_FOLDER: sockets }, readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz` },
);

const base = `http://127.0.0.1:${httpPort}/v1.0/state`;
const value = JSON.stringify({ id: 42, name: 'benchmark item', tags: ['a', 'b', 'c'], price: 9.99 });
const set = (store: string) =>
  load({
    url: `${base}/${store}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: (i) => `[{"key":"k${i % 1000}","value":${value}}]`,
    concurrency: CONCURRENCY,
    durationMs: DURATION_MS,
  });
const get = (store: string) => load({ url: `${base}/${store}/k7`, concurrency: CONCURRENCY, durationMs: DURATION_MS });
/** One load run with the CPU µs per request that the sidecar and the component process spent on it. */
type Measured = LoadResult & { sidecarUs: number; componentUs: number };
const measured = async (run: () => Promise<LoadResult>): Promise<Measured> => {
  const [s0, c0] = [procCpuMs(sidecar.proc.pid!), procCpuMs(proc.proc.pid!)];
  const r = await run();
  const per = (ms: number) => (ms * 1000) / Math.max(1, r.requests);
  return { ...r, sidecarUs: per(procCpuMs(sidecar.proc.pid!) - s0), componentUs: per(procCpuMs(proc.proc.pid!) - c0) };
};

try {
  const stores = ['builtin', 'pluggable', ...(withRedis ? ['redis'] : [])];
  // warm every path (JIT, connections) before measuring
  for (const s of stores) await set(s);
  const rows: Row[] = [];
  for (const [op, run] of [
    ['SET', set],
    ['GET', get],
  ] as const) {
    // the machine is shared: rotate the stores over several rounds and report medians, so that
    // a burst of other load does not land on one side only
    const results: Record<string, Measured[]> = Object.fromEntries(stores.map((s) => [s, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? stores : [...stores].reverse();
      for (const s of order) results[s].push(await measured(() => run(s)));
    }
    const rps = (s: string) => median(results[s].map((r) => r.rps));
    const p99 = (s: string) => median(results[s].map((r) => r.p99Ms));
    // ratio of each round's pair, then the median: pairs ran back to back under the same load
    const pairRatio = (a: string, b: string) => median(results[a].map((r, i) => r.rps / results[b][i].rps));
    const row: Row = {
      op,
      'in-memory req/s': rps('builtin'),
      'pluggable req/s': rps('pluggable'),
      'pluggable / in-memory': ratio(pairRatio('pluggable', 'builtin'), 1),
      'in-memory p99 ms': p99('builtin'),
      'pluggable p99 ms': p99('pluggable'),
      // where the 2 cores go: the sidecar per request on each path, and the component process
      'sidecar CPU µs/req in-memory': median(results.builtin.map((r) => r.sidecarUs)),
      'sidecar CPU µs/req pluggable': median(results.pluggable.map((r) => r.sidecarUs)),
      'component CPU µs/req': median(results.pluggable.map((r) => r.componentUs)),
    };
    if (withRedis) {
      row['redis req/s'] = rps('redis');
      row['pluggable / redis'] = ratio(pairRatio('pluggable', 'redis'), 1);
      row['redis p99 ms'] = p99('redis');
    }
    row.errors = Object.values(results)
      .flat()
      .reduce((n, r) => n + r.errors, 0);
    rows.push(row);
  }
  printTable(
    `state through a pluggable store vs built-in stores (HTTP, ${CONCURRENCY} concurrent, median of ${ROUNDS} rotating rounds of ${DURATION_MS / 1000} s; target pluggable ≥ 0.60× in-memory, issue 15)`,
    rows,
  );
  console.log(`\nload average at end: ${loadAvg()}`);
  if (withRedis) {
    // remove what the benchmark wrote to the shared Redis
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => fetch(`${base}/redis/k${i + j}`, { method: 'DELETE' }).then((r) => r.body?.cancel())));
    }
  }
} finally {
  await sidecar.stop();
  await proc.stop();
  rmSync(dir, { recursive: true, force: true });
}
