/**
 * Tracing benchmark: what tracing costs a call. The same calls through sidecars started alike,
 * tracing off (no spec.tracing: the anchor) against samplingRate "1" exporting over OTLP/gRPC to a
 * real Jaeger (test/services/jaeger.ts), in the same run, alternating:
 * - state GET of one small value from an in-memory store (one SERVER span);
 * - service invocation app → sidecar → sidecar → app (a SERVER span on each sidecar, the
 *   callee's for the call handed to the app).
 * Prints req/s at 32 in flight with the ratio to the anchor and the p50 at 100 req/s with what
 * tracing adds, and each sidecar's RSS after the run. Without a Jaeger (jaegerUnavailable) it says
 * so and measures nothing: an exporter toward a closed port would measure failing exports.
 *
 * Run: node bench/tracing.bench.ts   (env BENCH_SECONDS, BENCH_ROUNDS change the load)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/services/net.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../test/services/jaeger.ts';
import { load, machineLine, median, medianOfRuns, printTable, ratio, rssMb, startChild, type Child, type LoadResult, type Row } from './lib.ts';

const root = join(import.meta.dirname, '..');
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const APP = `require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{"ok":true,"n":42}'); }); }).listen(Number(process.env.PORT), '127.0.0.1');`;
const MEM = 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n';
const config = (endpoint: string) => `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: tracing\nspec:\n  tracing:\n    samplingRate: "1"\n    otel:\n      endpointAddress: "${endpoint}"\n      isSecure: false\n      protocol: grpc\n`;

async function pair(anchor: () => Promise<LoadResult>, on: () => Promise<LoadResult>): Promise<[LoadResult, LoadResult, number]> {
  const a: LoadResult[] = [];
  const o: LoadResult[] = [];
  for (let i = 0; i < rounds; i++) {
    a.push(await anchor());
    o.push(await on());
  }
  return [medianOfRuns(a), medianOfRuns(o), median(o.map((r, i) => r.rps / a[i].rps))];
}

const why = jaegerUnavailable();
if (why) {
  console.log(`tracing: no Jaeger here (${why}); nothing measured`);
  process.exit(0);
}
const home = mkdtempSync(join(tmpdir(), 'rt-bench-tracing-'));
const children: Child[] = [];
let jaeger: Jaeger | undefined;
try {
  console.log(machineLine());
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  jaeger = await startJaeger();
  const configFile = join(home, 'tracing.yaml');
  writeFileSync(configFile, config(jaeger.otlpGrpcEndpoint));
  const appPort = await freePort();
  children.push(await startChild(process.execPath, ['-e', APP], { env: { PORT: String(appPort) }, readyUrl: `http://127.0.0.1:${appPort}/` }));
  const pids: Record<string, number> = {};
  const sidecar = async (id: string, traced: boolean, extra: string[] = []) => {
    const dir = join(home, `${id}-resources`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'mem.yaml'), MEM);
    const http = await freePort();
    const child = await startChild(
      process.execPath,
      [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', id, '--http-port', String(http), '--grpc-port', '0', '--disable-metrics', '--log-level', 'warn', '--data-dir', join(home, id), '--resources-path', dir, ...(traced ? ['--config', configFile] : []), ...extra],
      { env: { RT_HOME: home }, readyUrl: `http://127.0.0.1:${http}/v1.0/healthz`, timeoutMs: 60_000 },
    );
    children.push(child);
    pids[id] = child.proc.pid!;
    return `http://127.0.0.1:${http}`;
  };
  await sidecar('target-off', false, ['--app-port', String(appPort)]);
  await sidecar('target-on', true, ['--app-port', String(appPort)]);
  const off = await sidecar('caller-off', false);
  const on = await sidecar('caller-on', true);
  for (const base of [off, on]) {
    const saved = await fetch(`${base}/v1.0/state/mem`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: { id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true } }]) });
    if (saved.status !== 204) throw new Error(`could not seed the store of ${base}: ${saved.status}`);
  }
  const stateUrl = (base: string) => `${base}/v1.0/state/mem/k`;
  const invokeUrl = (base: string, traced: boolean) => `${base}/v1.0/invoke/${traced ? 'target-on' : 'target-off'}/method/ping`;
  const ms = seconds * 1000;
  for (const [base, traced] of [[off, false], [on, true]] as const) {
    await load({ url: stateUrl(base), durationMs: 1500 });
    await load({ url: invokeUrl(base, traced), durationMs: 1500 });
  }
  const closed = (url: string) => () => load({ url, durationMs: ms, concurrency: 32 });
  const light = (url: string) => () => load({ url, durationMs: ms, rate: 100, concurrency: 64 });
  const rows: Row[] = [];
  const lightRows: Row[] = [];
  for (const [what, offUrl, onUrl] of [
    ['state GET (in-memory)', stateUrl(off), stateUrl(on)],
    ['invoke (app → sidecar → sidecar → app)', invokeUrl(off, false), invokeUrl(on, true)],
  ] as const) {
    const [a, o, r] = await pair(closed(offUrl), closed(onUrl));
    // at 32 in flight, each call's CPU share is 32 / req/s: µs per call the sampled spans add
    const addedUs = (1e6 / o.rps - 1e6 / a.rps).toFixed(0);
    rows.push({ case: what, 'tracing off req/s (anchor)': a.rps, 'sampling 1.0 req/s': o.rps, 'on ÷ off': `${r.toFixed(2)}×`, 'ratio of medians': ratio(o.rps, a.rps), 'added µs per call (1/req/s)': addedUs, errors: a.errors + o.errors });
    const [la, lo] = await pair(light(offUrl), light(onUrl));
    lightRows.push({ case: what, 'p50 ms off': la.p50Ms, 'p50 ms on': lo.p50Ms, 'added p50 ms': lo.p50Ms - la.p50Ms, 'p99 ms off': la.p99Ms, 'p99 ms on': lo.p99Ms, errors: la.errors + lo.errors });
  }
  printTable(`tracing — most req/s at 32 in flight, samplingRate 1 (OTLP/gRPC to Jaeger) against tracing off (median of ${rounds} alternating ${seconds} s runs)`, rows);
  printTable(`tracing — at 100 req/s, nothing queued (median of ${rounds} alternating ${seconds} s runs)`, lightRows);
  printTable('tracing — RSS of each sidecar after the run', Object.entries(pids).map(([id, pid]) => ({ sidecar: id, 'RSS MB': rssMb(pid) })));
  console.log(`load average after the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')}`);
} finally {
  for (const c of children.reverse()) await c.stop();
  await jaeger?.stop();
  rmSync(home, { recursive: true, force: true });
}
