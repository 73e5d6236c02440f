/**
 * Does one large value stall a `state.sqlite` store, and the sidecar with it? (issue 17)
 *
 * One `rt sidecar` child with two SQLite stores: `small` holds one small value, `large` one
 * 8 MB value under the same key (the probe that found the stall). For each: the time of a bulk get of 1,000 missing keys, and the p99
 * of `/v1.0/healthz` (at 100 req/s) while such bulk gets run back to back. The anchor is the
 * store without the large value: the ratio says what the large value costs.
 *
 * Run: node bench/state-stall.bench.ts   (env BENCH_SECONDS: seconds of healthz load per case)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load, machineLine, printTable, ratio, startChild, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MISSING = JSON.stringify({ keys: Array.from({ length: 1000 }, (_, i) => `missing-${i}`) });

async function post(url: string, body: string): Promise<number> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`${url}: ${res.status}`);
  return res.status;
}

async function main(): Promise<void> {
  console.log(machineLine());
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  const seconds = Number(process.env.BENCH_SECONDS ?? 4);
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-stall-'));
  const component = (name: string) =>
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: state.sqlite\n  version: v1\n  metadata:\n    - name: connectionString\n      value: "${join(dir, `${name}.db`)}"\n`;
  writeFileSync(join(dir, 'state.yaml'), [component('small'), component('large')].join('---\n'));
  const [sp, sg] = [await freePort(), await freePort()];
  const sidecar = await startChild(
    process.execPath,
    [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', 'bench', '--http-port', String(sp), '--grpc-port', String(sg), '--resources-path', dir, '--log-level', 'warn'],
    { readyUrl: `http://127.0.0.1:${sp}/v1.0/healthz` },
  );
  const base = `http://127.0.0.1:${sp}`;
  try {
    await post(`${base}/v1.0/state/small`, JSON.stringify([{ key: 'big', value: 'x' }]));
    await post(`${base}/v1.0/state/large`, JSON.stringify([{ key: 'big', value: 'x'.repeat(8 * 1024 * 1024) }]));

    const rows: Row[] = [];
    const measured: Record<string, { bulkMs: number; p99: number }> = {};
    for (const store of ['small', 'large']) {
      const url = `${base}/v1.0/state/${store}/bulk`;
      await post(url, MISSING); // warm up
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        await post(url, MISSING);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      // bulk gets back to back while a probe asks /v1.0/healthz 100 times a second
      let running = true;
      let bulkErrors = 0;
      const bulkLoop = (async () => {
        while (running) await post(url, MISSING).catch(() => bulkErrors++);
      })();
      const health = await load({ url: `${base}/v1.0/healthz`, rate: 100, concurrency: 16, durationMs: seconds * 1000 });
      running = false;
      await bulkLoop;
      measured[store] = { bulkMs: times[2], p99: health.p99Ms };
      rows.push({
        case: store === 'small' ? 'no large value (anchor)' : 'one 8 MB value stored',
        'bulk get 1,000 missing keys, ms (median of 5)': times[2],
        'healthz p99 ms during bulk gets': health.p99Ms,
        'healthz errors': health.errors,
        'bulk errors': bulkErrors,
      });
    }
    rows.push({
      case: 'large / anchor',
      'bulk get 1,000 missing keys, ms (median of 5)': ratio(measured.large.bulkMs, measured.small.bulkMs),
      'healthz p99 ms during bulk gets': ratio(measured.large.p99, measured.small.p99),
      'healthz errors': '',
      'bulk errors': '',
    });
    printTable('state.sqlite: bulk get with and without one 8 MB value stored; /v1.0/healthz while it runs', rows);
  } finally {
    await sidecar.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
