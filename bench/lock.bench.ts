/**
 * Distributed lock benchmark: lock acquire + release pairs per second through a sidecar child
 * process (`rt sidecar` with a lock.redis store, HTTP `POST /v1.0-alpha1/lock` then `/unlock`)
 * against the same pair straight on Redis with ioredis (`SET key owner NX PX` and the same Lua
 * compare-and-delete release), in the same run, alternating.
 *
 * Each of `concurrency` workers takes and releases a lock of its own, so every pair succeeds;
 * the figure is what one pair costs, not contention. Target (issue 41): ≥ 0.5× bare ioredis. A
 * third row is the floor of the HTTP hop: two requests to the sidecar's lightest route
 * (`/v1.0/healthz`), no Redis behind them, so what the lock path adds is told from what any two
 * requests through a sidecar cost.
 *
 * The sidecar is the compiled build, as the image runs it (bench/lib.ts buildRt; BENCH_SOURCES=1:
 * the TypeScript sources). Run: node bench/lock.bench.ts (env BENCH_SECONDS, BENCH_CONCURRENCY,
 * BENCH_ROUNDS change the load).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { buildRt, closedLoop, closedLoopSettings, loadLine, medianRun, printTable, ratio, shortTempDir, startChild, type ClosedLoopResult, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';
import { redisTarget } from '../test/services/redis.ts';

const root = join(import.meta.dirname, '..');
// the release lock.redis runs (sidecar/src/components/lock/redis/index.ts), for the anchor
const UNLOCK = `
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if v ~= ARGV[1] then return -2 end
return redis.call('DEL', KEYS[1])
`;




const { seconds, concurrency, rounds, durationMs } = closedLoopSettings();
const target = await redisTarget();
if (!target.available) {
  console.log(`Redis is not reachable at ${target.url} (RT_TEST_REDIS_URL): nothing to measure`);
  process.exit(process.env.CI === 'true' ? 1 : 0);
}

const dir = mkdtempSync(join(tmpdir(), 'rt-bench-lock-'));
const buildDir = shortTempDir();
process.on('exit', () => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(buildDir, { recursive: true, force: true });
});
const md = { redisHost: target.redisHost, redisDB: String(target.db), ...(target.password ? { redisPassword: target.password } : {}) };
writeFileSync(
  join(dir, 'lock.yaml'),
  `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: locks\nspec:\n  type: lock.redis\n  version: v1\n  metadata:\n${Object.entries(md)
    .map(([k, v]) => `    - name: ${k}\n      value: "${v}"\n`)
    .join('')}`,
);
const entry = process.env.BENCH_SOURCES === '1' ? join(root, 'cli/rt.ts') : buildRt(buildDir);
const [hp, gp] = [await freePort(), await freePort()];
const sidecar = await startChild(process.execPath, [entry, 'sidecar', '--app-id', 'bench', '--http-port', String(hp), '--grpc-port', String(gp), '--resources-path', dir, '--log-level', 'warn'], {
  readyUrl: `http://127.0.0.1:${hp}/v1.0/healthz`,
});
const { Redis } = await import('ioredis');
const redis = new Redis({ host: target.host, port: target.port, db: target.db, password: target.password, username: target.username });
redis.defineCommand('benchUnlock', { numberOfKeys: 1, lua: UNLOCK });
const unlockDirect = (redis as unknown as { benchUnlock(key: string, owner: string): Promise<number> }).benchUnlock.bind(redis);
const pool = new Pool(`http://127.0.0.1:${hp}`, { connections: concurrency, pipelining: 1 });
const run = `${process.pid}`;

/** One pair through the sidecar: both answers must say it worked. */
async function sidecarPair(w: number): Promise<boolean> {
  const body = JSON.stringify({ resourceId: `bench-${run}-${w}`, lockOwner: `owner-${w}`, expiryInSeconds: 30 });
  const locked = await pool.request({ path: '/v1.0-alpha1/lock/locks', method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const l = (await locked.body.json()) as { success?: boolean };
  const unlocked = await pool.request({ path: '/v1.0-alpha1/unlock/locks', method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const u = (await unlocked.body.json()) as { status?: number };
  return l.success === true && u.status === 0;
}

/** The floor of the HTTP hop: two requests to the sidecar's lightest route, no Redis behind them. */
async function floorPair(): Promise<boolean> {
  for (let i = 0; i < 2; i++) {
    const r = await pool.request({ path: '/v1.0/healthz', method: 'GET' });
    await r.body.dump();
    if (r.statusCode !== 204) return false;
  }
  return true;
}

/** The same pair on Redis directly. */
async function directPair(w: number): Promise<boolean> {
  const key = `lock||bench-direct||${run}-${w}`;
  const owner = `owner-${w}`;
  const ok = (await redis.set(key, owner, 'PX', 30_000, 'NX')) === 'OK';
  return ok && (await unlockDirect(key, owner)) === 1;
}

try {
  // warm up both paths (JIT, connections, the script cache)
  await closedLoop(sidecarPair, concurrency, 1000);
  await closedLoop(directPair, concurrency, 1000);
  await closedLoop(floorPair, concurrency, 1000);
  const viaSidecar: ClosedLoopResult[] = [];
  const direct: ClosedLoopResult[] = [];
  const floor: ClosedLoopResult[] = [];
  for (let r = 0; r < rounds; r++) {
    viaSidecar.push(await closedLoop(sidecarPair, concurrency, durationMs));
    direct.push(await closedLoop(directPair, concurrency, durationMs));
    floor.push(await closedLoop(floorPair, concurrency, durationMs));
  }
  const s = medianRun(viaSidecar);
  const d = medianRun(direct);
  const f = medianRun(floor);
  const rows: Row[] = [
    { case: 'lock + unlock via the sidecar (HTTP)', 'pairs/s': s.perSec, 'p50 ms': s.p50Ms, 'p99 ms': s.p99Ms, errors: s.errors, 'vs ioredis': ratio(s.perSec, d.perSec) },
    { case: 'floor: 2 × GET /v1.0/healthz through the same sidecar', 'pairs/s': f.perSec, 'p50 ms': f.p50Ms, 'p99 ms': f.p99Ms, errors: f.errors, 'vs ioredis': ratio(f.perSec, d.perSec) },
    { case: 'anchor: ioredis SET NX PX + Lua release', 'pairs/s': d.perSec, 'p50 ms': d.p50Ms, 'p99 ms': d.p99Ms, errors: d.errors, 'vs ioredis': '1.00×' },
  ];
  printTable(`lock acquire + release pairs, ${concurrency} in flight, ${seconds} s per run, median of ${rounds} alternating runs`, rows);
  printTable('targets', [{ target: 'pairs/s via the sidecar ≥ 0.5× bare ioredis', measured: ratio(s.perSec, d.perSec), met: s.perSec >= 0.5 * d.perSec ? 'yes' : 'no' }]);
  console.log(`load average after the run: ${loadLine()}`);
} finally {
  await pool.close();
  redis.disconnect();
  await sidecar.stop();
}
