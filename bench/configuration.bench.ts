/**
 * Configuration API benchmark (issue 41): GET of one configuration item through a sidecar child
 * process (`rt sidecar`) beside the state GET of the same store kind, in the same run and the
 * same sidecar: configuration.redis against state.redis, configuration.postgresql against
 * state.postgresql. Target: configuration GET req/s within (≥) the state GET figure.
 *
 * The sidecar is the compiled build, as the image runs it (bench/lib.ts buildRt; BENCH_SOURCES=1:
 * the TypeScript sources).
 *
 * Run: node bench/configuration.bench.ts   (env BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_ROUNDS change the load)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alternating, buildRt, load, machineLine, printTable, ratio, shortTempDir, startChild, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';
import { postgresTarget } from '../test/services/postgres.ts';
import { redisTarget } from '../test/services/redis.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const VALUE = JSON.stringify({ id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true });
const TABLE = `rt_bench_cfg_${process.pid}`;

const component = (name: string, type: string, md: Record<string, string>) =>
  `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:\n${Object.entries(md)
    .map(([k, v]) => `    - name: ${k}\n      value: ${JSON.stringify(v)}\n`)
    .join('')}`;

async function main(): Promise<void> {
  console.log(machineLine());
  const seconds = Number(process.env.BENCH_SECONDS ?? 1);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 9);
  const durationMs = seconds * 1000;
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  const redis = await redisTarget();
  const pg = await postgresTarget();
  if (!redis.available) console.log('(Redis not reachable (RT_TEST_REDIS_URL): its row is left out)');
  if (!pg.available) console.log('(PostgreSQL not reachable (RT_TEST_POSTGRES_URL): its row is left out)');
  if (!redis.available && !pg.available) {
    console.log('neither Redis nor PostgreSQL is reachable (RT_TEST_REDIS_URL, RT_TEST_POSTGRES_URL): nothing to measure');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-configuration-'));
  const docs: string[] = [];
  if (redis.available) {
    docs.push(component('sredis', 'state.redis', { redisHost: redis.redisHost, keyPrefix: 'rt-bench' }));
    docs.push(component('credis', 'configuration.redis', { redisHost: redis.redisHost }));
  }
  const { default: pgLib } = await import('pg');
  const db = pg.available ? new pgLib.Client({ connectionString: pg.url }) : undefined;
  if (db) {
    await db.connect();
    await db.query(`CREATE TABLE ${TABLE} (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL, version TEXT NOT NULL, metadata JSON)`);
    await db.query(`INSERT INTO ${TABLE} VALUES ('k', $1, '1', NULL)`, [VALUE]);
    docs.push(component('spg', 'state.postgresql', { connectionString: pg.url, tableName: `${TABLE}_state` }));
    docs.push(component('cpg', 'configuration.postgresql', { connectionString: pg.url, table: TABLE }));
  }
  writeFileSync(join(dir, 'components.yaml'), docs.join('---\n'));

  const buildDir = shortTempDir();
  process.on('exit', () => rmSync(buildDir, { recursive: true, force: true }));
  const entry = process.env.BENCH_SOURCES === '1' ? join(root, 'cli/rt.ts') : buildRt(buildDir);
  const [hp, gp] = [await freePort(), await freePort()];
  const sidecar = await startChild(process.execPath, [entry, 'sidecar', '--app-id', 'bench', '--http-port', String(hp), '--grpc-port', String(gp), '--resources-path', dir, '--log-level', 'warn'], {
    readyUrl: `http://127.0.0.1:${hp}/v1.0/healthz`,
  });
  const { Redis } = await import('ioredis');
  const direct = redis.available ? new Redis({ host: redis.host, port: redis.port, username: redis.username, password: redis.password }) : undefined;
  const base = `http://127.0.0.1:${hp}/v1.0`;
  try {
    const rows: Row[] = [];
    const get = (url: string) => () => load({ url, concurrency, durationMs });
    const kinds: [string, string, string][] = [];
    if (direct) {
      await direct.set('rt-bench-cfg', `${VALUE}||1`);
      await load({ url: `${base}/state/sredis`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: JSON.parse(VALUE) }]), concurrency: 1, durationMs: 200 });
      kinds.push(['Redis', `${base}/configuration/credis?key=rt-bench-cfg`, `${base}/state/sredis/k`]);
    }
    if (db) {
      await load({ url: `${base}/state/spg`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: JSON.parse(VALUE) }]), concurrency: 1, durationMs: 200 });
      kinds.push(['PostgreSQL', `${base}/configuration/cpg?key=k`, `${base}/state/spg/k`]);
    }
    for (const [kind, cfgUrl, stateUrl] of kinds) {
      // warm up both (JIT, connections)
      for (const u of [cfgUrl, stateUrl]) await load({ url: u, concurrency, durationMs: 1000 });
      const [cfg, state, pairRatio] = await alternating(get(cfgUrl), get(stateUrl), rounds);
      rows.push({ store: kind, 'configuration GET req/s': cfg.rps, 'p50 ms': cfg.p50Ms, 'p99 ms': cfg.p99Ms, errors: cfg.errors, 'state GET req/s': state.rps, 'state p99 ms': state.p99Ms, ratio: ratio(cfg.rps, state.rps), 'ratio per round (median)': `${pairRatio.toFixed(2)}×`, met: pairRatio >= 1 ? 'yes' : 'no' });
    }
    printTable(`configuration GET beside state GET of the same store kind, one key, concurrency ${concurrency}, ${seconds} s per run, median of ${rounds} alternating runs; met: the median ratio of a round's two runs ≥ 1`, rows);
  } finally {
    direct?.disconnect();
    await sidecar.stop();
    if (db) {
      await db.query(`DROP TABLE IF EXISTS ${TABLE}`).catch(() => undefined);
      for (const q of [`DROP TABLE IF EXISTS ${TABLE}_state`, `DROP SEQUENCE IF EXISTS ${TABLE}_state_etag_seq`, `DROP FUNCTION IF EXISTS ${TABLE}_state_jsonb(bytea)`]) await db.query(q).catch(() => undefined);
      await db.end();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
