/**
 * State API benchmark: GET and SET of one small JSON value through a sidecar child process
 * (`rt sidecar`, in-memory and Redis stores) against the same operation on a bare fastify
 * route (also a child process) and directly against Redis with ioredis.
 *
 * Prints req/s, p50 and p99 at fixed concurrency, the p99 the sidecar adds at a steady
 * 1,000 req/s, and the idle sidecar's RSS. Targets (issue 2): in-memory GET ≥ 60% of bare
 * fastify, < 1 ms added p99 at 1k req/s, idle RSS ≤ 70 MB.
 *
 * The sidecar is the compiled build, as the image runs it (bench/lib.ts buildRt; BENCH_SOURCES=1:
 * the TypeScript sources, as `npm start` runs them).
 *
 * Run: node bench/state.bench.ts   (env BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_ROUNDS change the load)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRt, load, machineLine, percentile, printTable, ratio, rssMb, shortTempDir, startChild, type LoadResult, type Row } from './lib.ts';
import { redisTarget } from '../test/services/redis.ts';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const VALUE = JSON.stringify({ id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true });
const SAVE_BODY = JSON.stringify([{ key: 'k', value: JSON.parse(VALUE) }]);

if (process.argv[2] === '--serve-bare') await serveBare(Number(process.argv[3]));
else await main();

/** The anchor: the same GET/SET semantics on a bare fastify route, values in a Map. */
async function serveBare(port: number): Promise<void> {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  const items = new Map<string, Buffer>();
  app.post<{ Params: { store: string } }>('/v1.0/state/:store', async (req, reply) => {
    for (const it of req.body as { key: string; value: unknown }[]) items.set(it.key, Buffer.from(JSON.stringify(it.value)));
    return reply.code(204).send();
  });
  app.get<{ Params: { store: string; key: string } }>('/v1.0/state/:store/:key', async (req, reply) => {
    const v = items.get(req.params.key);
    if (!v) return reply.code(204).send();
    return reply.header('content-type', 'application/json').send(v);
  });
  app.get('/v1.0/healthz', async (_req, reply) => reply.code(204).send());
  await app.listen({ host: '127.0.0.1', port });
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

/** Closed loop over ioredis: `concurrency` workers issuing one command at a time. */
async function loadRedis(op: () => Promise<unknown>, concurrency: number, durationMs: number): Promise<LoadResult> {
  const lat: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await op();
        } catch {
          errors++;
        }
        lat.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  return { requests: lat.length, errors, rps: lat.length / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
}

/**
 * Runs two measurements alternately (a, b, a, b, …) and keeps the median run of each, so a
 * burst of load from elsewhere on a shared machine does not land on one side only.
 */
async function paired(a: () => Promise<LoadResult>, b: () => Promise<LoadResult>, rounds: number): Promise<[LoadResult, LoadResult]> {
  const ra: LoadResult[] = [];
  const rb: LoadResult[] = [];
  for (let i = 0; i < rounds; i++) {
    ra.push(await a());
    rb.push(await b());
  }
  return [median(ra), median(rb)];
}

/** The run with the median p99, with throughput and p50 medians of all runs. */
function median(runs: LoadResult[]): LoadResult {
  const mid = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  return {
    requests: runs.reduce((n, r) => n + r.requests, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    rps: mid(runs.map((r) => r.rps)),
    p50Ms: mid(runs.map((r) => r.p50Ms)),
    p99Ms: mid(runs.map((r) => r.p99Ms)),
  };
}

function row(name: string, r: LoadResult, anchor?: LoadResult, anchorName?: string): Row {
  return {
    case: name,
    'req/s': r.rps,
    'p50 ms': r.p50Ms,
    'p99 ms': r.p99Ms,
    errors: r.errors,
    anchor: anchorName ?? '',
    'anchor req/s': anchor ? anchor.rps : '',
    'anchor p99 ms': anchor ? anchor.p99Ms : '',
    'vs anchor': anchor ? ratio(r.rps, anchor.rps) : '',
  };
}

async function main(): Promise<void> {
  console.log(machineLine());
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const durationMs = seconds * 1000;
  const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  const target = await redisTarget();
  const withRedis = target.available;

  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-state-'));
  const component = (name: string, type: string, md: Record<string, string> = {}) =>
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:\n${
      Object.entries(md).map(([k, v]) => `    - name: ${k}\n      value: "${v}"\n`).join('') || '    []\n'
    }`;
  const docs = [component('mem', 'state.in-memory')];
  if (withRedis) docs.push(component('redis', 'state.redis', { redisHost: target.redisHost, keyPrefix: 'rt-bench' }));
  writeFileSync(join(dir, 'state.yaml'), docs.join('---\n'));

  const buildDir = shortTempDir();
  process.on('exit', () => rmSync(buildDir, { recursive: true, force: true }));
  const entry = process.env.BENCH_SOURCES === '1' ? join(root, 'cli/rt.ts') : buildRt(buildDir);
  const [sp, sg, bp] = [await freePort(), await freePort(), await freePort()];
  const sidecar = await startChild(process.execPath, [entry, 'sidecar', '--app-id', 'bench', '--http-port', String(sp), '--grpc-port', String(sg), '--resources-path', dir, '--log-level', 'warn'], {
    readyUrl: `http://127.0.0.1:${sp}/v1.0/healthz`,
  });
  const bare = await startChild(process.execPath, [fileURLToPath(import.meta.url), '--serve-bare', String(bp)], { readyUrl: `http://127.0.0.1:${bp}/v1.0/healthz` });
  const { Redis } = await import('ioredis');
  const redis = withRedis ? new Redis({ host: target.host, port: target.port }) : undefined;

  try {
    // past the end of start-up's memory reduction (cli/memory-reducer.ts)
    await new Promise((r) => setTimeout(r, 2000));
    const idleRss = rssMb(sidecar.proc.pid!);
    const sc = `http://127.0.0.1:${sp}/v1.0/state`;
    const bf = `http://127.0.0.1:${bp}/v1.0/state`;
    const json = { 'content-type': 'application/json' };
    const get = (url: string, extra: Partial<Parameters<typeof load>[0]> = {}) => load({ url, concurrency, durationMs, ...extra });
    const set = (url: string) => load({ url, method: 'POST', headers: json, body: SAVE_BODY, concurrency, durationMs });

    // seed and warm up every target (JIT, connections)
    for (const u of [`${sc}/mem`, `${bf}/mem`, ...(withRedis ? [`${sc}/redis`] : [])]) {
      await load({ url: u, method: 'POST', headers: json, body: SAVE_BODY, concurrency, durationMs: 1000 });
      await load({ url: `${u}/k`, concurrency, durationMs: 1000 });
    }

    const rows: Row[] = [];
    const [memGet, bareGet] = await paired(() => get(`${sc}/mem/k`), () => get(`${bf}/mem/k`), rounds);
    rows.push(row('GET in-memory via sidecar', memGet, bareGet, 'bare fastify GET'));
    const [memSet, bareSet] = await paired(() => set(`${sc}/mem`), () => set(`${bf}/mem`), rounds);
    rows.push(row('SET in-memory via sidecar', memSet, bareSet, 'bare fastify POST'));
    if (withRedis && redis) {
      await redis.hset('rt-bench-direct', 'data', VALUE, 'version', '1');
      const [redisGet, directGet] = await paired(
        () => get(`${sc}/redis/k`),
        () => loadRedis(() => redis.hmget('rt-bench-direct', 'data', 'version'), concurrency, durationMs),
        rounds,
      );
      rows.push(row('GET Redis via sidecar', redisGet, directGet, 'ioredis HMGET'));
      const [redisSet, directSet] = await paired(() => set(`${sc}/redis`), () => loadRedis(() => redis.hset('rt-bench-direct', 'data', VALUE), concurrency, durationMs), rounds);
      rows.push(row('SET Redis via sidecar', redisSet, directSet, 'ioredis HSET'));
    }
    printTable(`state GET/SET, concurrency ${concurrency}, ${seconds} s per run, median of ${rounds} alternating runs`, rows);

    const rate = 1000;
    // many short alternating runs: a stall from elsewhere spoils one run, not the median
    const rateRuns = rounds * 4;
    const atRate = (url: string) => get(url, { rate, concurrency: 64, durationMs: 2000 });
    const [memRate, bareRate] = await paired(() => atRate(`${sc}/mem/k`), () => atRate(`${bf}/mem/k`), rateRuns);
    printTable(`at a steady ${rate} req/s (GET in-memory), median of ${rateRuns} alternating 2 s runs`, [
      { case: 'bare fastify', 'req/s': bareRate.rps, 'p50 ms': bareRate.p50Ms, 'p99 ms': bareRate.p99Ms, errors: bareRate.errors },
      { case: 'sidecar', 'req/s': memRate.rps, 'p50 ms': memRate.p50Ms, 'p99 ms': memRate.p99Ms, errors: memRate.errors },
      { case: 'added by the sidecar', 'p50 ms': memRate.p50Ms - bareRate.p50Ms, 'p99 ms': memRate.p99Ms - bareRate.p99Ms },
    ]);

    printTable('targets', [
      { target: 'in-memory GET ≥ 60% of bare fastify', measured: ratio(memGet.rps, bareGet.rps), met: memGet.rps >= 0.6 * bareGet.rps ? 'yes' : 'no' },
      { target: 'added p99 < 1 ms at 1k req/s', measured: `${(memRate.p99Ms - bareRate.p99Ms).toFixed(2)} ms`, met: memRate.p99Ms - bareRate.p99Ms < 1 ? 'yes' : 'no' },
      { target: 'idle sidecar RSS ≤ 70 MB', measured: `${idleRss.toFixed(1)} MB`, met: idleRss <= 70 ? 'yes' : 'no' },
    ]);
    if (withRedis && redis) await redis.del('rt-bench-direct', 'rt-bench||k');
    else console.log('\n(Redis not reachable (RT_TEST_REDIS_URL): Redis rows left out)');
  } finally {
    redis?.disconnect();
    await sidecar.stop();
    await bare.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
