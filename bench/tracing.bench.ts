/**
 * Tracing benchmark: what tracing costs a call, and that tracing off costs nothing (issue 40).
 * The same calls through sidecars started alike, four ways, in one run, in rotating order each round:
 * - **no Configuration at all** (the anchor);
 * - **tracing configured at samplingRate "0"** (an otel endpoint, rate 0: off);
 * - **a Configuration without spec.tracing** (off);
 * - **samplingRate "1"**, exporting over OTLP/gRPC to a real Jaeger (test/services/jaeger.ts).
 * Calls: state GET of one small value from an in-memory store (one SERVER span), and service
 * invocation app → sidecar → sidecar → app (a SERVER span on each sidecar). Prints, per case, req/s
 * at 32 in flight with the median of the per-round ratios to the anchor (a round's runs share the
 * machine's load of the moment), the sidecars' CPU µs per call, the p50 at 100 req/s, RSS after,
 * and the load average before and after (a loaded machine makes small differences unreadable).
 * Without a Jaeger (jaegerUnavailable) it says so and measures nothing: an exporter toward a closed
 * port would measure failing exports.
 *
 * Run: node bench/tracing.bench.ts   (env BENCH_SECONDS, BENCH_ROUNDS change the load)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/services/net.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../test/services/jaeger.ts';
import { load, loadLine, machineLine, median, medianOfRuns, printTable, procCpuMs, rssMb, startChild, type Child, type LoadResult, type Row } from './lib.ts';

const root = join(import.meta.dirname, '..');
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const APP = `require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{"ok":true,"n":42}'); }); }).listen(Number(process.env.PORT), '127.0.0.1');`;
const MEM = 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n';
const configuration = (spec: string) => `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: bench\nspec:\n${spec}`;
const tracing = (rate: string, endpoint: string) => `  tracing:\n    samplingRate: "${rate}"\n    otel:\n      endpointAddress: "${endpoint}"\n      isSecure: false\n      protocol: grpc\n`;

/** The four ways a sidecar is started; the first is the anchor. */
const VARIANTS = ['no Configuration', 'tracing at rate 0', 'Configuration, no tracing', 'sampling 1.0'] as const;
type Variant = (typeof VARIANTS)[number];

interface Measured {
  runs: LoadResult[];
  /** CPU µs the variant's sidecars spent per call, per run. */
  cpuUs: number[];
}

/**
 * Runs each variant once per round, the order rotated each round so that none always goes first;
 * `pids` are the sidecars whose CPU a call of that variant uses.
 */
async function rotate(run: (v: Variant) => Promise<LoadResult>, pids: (v: Variant) => number[]): Promise<Map<Variant, Measured>> {
  const out = new Map<Variant, Measured>(VARIANTS.map((v) => [v, { runs: [], cpuUs: [] }]));
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const v = VARIANTS[(i + k) % VARIANTS.length];
      const cpu = () => pids(v).reduce((n, pid) => n + procCpuMs(pid), 0);
      const before = cpu();
      const r = await run(v);
      const m = out.get(v)!;
      m.runs.push(r);
      m.cpuUs.push(((cpu() - before) * 1000) / Math.max(1, r.requests));
    }
  }
  return out;
}

/** The median over rounds of this variant's req/s ÷ the anchor's of the same round. */
const roundRatio = (m: Map<Variant, Measured>, v: Variant) => median(m.get(v)!.runs.map((r, i) => r.rps / m.get(VARIANTS[0])!.runs[i].rps));

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
  console.log(`load average before the run: ${loadLine()} (other work on this machine skews the figures)`);
  jaeger = await startJaeger();
  const configs: Record<Variant, string | undefined> = {
    'no Configuration': undefined,
    'tracing at rate 0': configuration(tracing('0', jaeger.otlpGrpcEndpoint)),
    'Configuration, no tracing': configuration('  metric:\n    enabled: false\n'),
    'sampling 1.0': configuration(tracing('1', jaeger.otlpGrpcEndpoint)),
  };
  const appPort = await freePort();
  children.push(await startChild(process.execPath, ['-e', APP], { env: { PORT: String(appPort) }, readyUrl: `http://127.0.0.1:${appPort}/` }));
  const pids: Record<string, number> = {};
  const sidecar = async (id: string, variant: Variant, extra: string[] = []) => {
    const dir = join(home, `${id}-resources`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'mem.yaml'), MEM);
    const config = configs[variant];
    const configFile = join(home, `${id}.config.yaml`);
    if (config) writeFileSync(configFile, config);
    const http = await freePort();
    const child = await startChild(
      process.execPath,
      [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', id, '--http-port', String(http), '--grpc-port', '0', '--disable-metrics', '--log-level', 'warn', '--data-dir', join(home, id), '--resources-path', dir, ...(config ? ['--config', configFile] : []), ...extra],
      // no OTEL_EXPORTER_OTLP_* from the caller's environment: it could turn tracing on in every variant
      { env: { RT_HOME: home, OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' }, readyUrl: `http://127.0.0.1:${http}/v1.0/healthz`, timeoutMs: 90_000 },
    );
    children.push(child);
    pids[id] = child.proc.pid!;
    return `http://127.0.0.1:${http}`;
  };
  const slug = (v: Variant) => `v${VARIANTS.indexOf(v)}`;
  const callers = {} as Record<Variant, string>;
  for (const v of VARIANTS) {
    await sidecar(`target-${slug(v)}`, v, ['--app-port', String(appPort)]);
    callers[v] = await sidecar(`caller-${slug(v)}`, v);
    const saved = await fetch(`${callers[v]}/v1.0/state/mem`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: { id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true } }]) });
    if (saved.status !== 204) throw new Error(`could not seed the store of ${callers[v]}: ${saved.status}`);
  }
  const stateUrl = (v: Variant) => `${callers[v]}/v1.0/state/mem/k`;
  const invokeUrl = (v: Variant) => `${callers[v]}/v1.0/invoke/target-${slug(v)}/method/ping`;
  const ms = seconds * 1000;
  for (const v of VARIANTS) {
    await load({ url: stateUrl(v), durationMs: 1500 });
    await load({ url: invokeUrl(v), durationMs: 1500 });
  }
  const cases = [
    { what: 'state GET (in-memory)', url: stateUrl, pids: (v: Variant) => [pids[`caller-${slug(v)}`]] },
    { what: 'invoke (app → sidecar → sidecar → app)', url: invokeUrl, pids: (v: Variant) => [pids[`caller-${slug(v)}`], pids[`target-${slug(v)}`]] },
  ];
  const rows: Row[] = [];
  const cpuRows: Row[] = [];
  const lightRows: Row[] = [];
  for (const c of cases) {
    const closed = await rotate((v) => load({ url: c.url(v), durationMs: ms, concurrency: 32 }), c.pids);
    const anchor = medianOfRuns(closed.get(VARIANTS[0])!.runs);
    const row: Row = { case: c.what, 'no Configuration req/s (anchor)': anchor.rps };
    for (const v of VARIANTS.slice(1)) {
      const m = medianOfRuns(closed.get(v)!.runs);
      row[`${v} req/s`] = m.rps;
      row[`${v} ÷ anchor`] = `${roundRatio(closed, v).toFixed(2)}×`;
    }
    row.errors = VARIANTS.reduce((n, v) => n + medianOfRuns(closed.get(v)!.runs).errors, 0);
    rows.push(row);
    const cpu: Row = { case: c.what };
    for (const v of VARIANTS) cpu[`${v} µs`] = median(closed.get(v)!.cpuUs);
    cpu['sampling 1.0 adds µs'] = median(closed.get('sampling 1.0')!.cpuUs) - median(closed.get(VARIANTS[0])!.cpuUs);
    cpuRows.push(cpu);
    const light = await rotate((v) => load({ url: c.url(v), durationMs: ms, rate: 100, concurrency: 64 }), c.pids);
    const lightRow: Row = { case: c.what };
    const anchorP50 = medianOfRuns(light.get(VARIANTS[0])!.runs).p50Ms;
    lightRow['no Configuration p50 ms'] = anchorP50;
    for (const v of VARIANTS.slice(1)) lightRow[`${v} p50 ms (added)`] = `${medianOfRuns(light.get(v)!.runs).p50Ms.toFixed(2)} (${(medianOfRuns(light.get(v)!.runs).p50Ms - anchorP50 >= 0 ? '+' : '')}${(medianOfRuns(light.get(v)!.runs).p50Ms - anchorP50).toFixed(2)})`;
    lightRow.errors = VARIANTS.reduce((n, v) => n + medianOfRuns(light.get(v)!.runs).errors, 0);
    lightRows.push(lightRow);
  }
  printTable(`tracing — req/s at 32 in flight; ÷ anchor is the median of the ${rounds} rounds' ratios (each round runs all four, order rotated, ${seconds} s each)`, rows);
  printTable('tracing — CPU µs per call of the sidecars the call crosses (the caller; for invoke the caller and the target), median of the rounds at 32 in flight', cpuRows);
  printTable(`tracing — p50 at 100 req/s, nothing queued (median of ${rounds} rotating rounds of ${seconds} s)`, lightRows);
  printTable('tracing — RSS of each sidecar after the run', Object.entries(pids).map(([id, pid]) => ({ sidecar: `${id} (${VARIANTS[Number(id.slice(-1))]})`, 'RSS MB': rssMb(pid) })));
  console.log(`load average after the run: ${loadLine()}`);
} finally {
  for (const c of children.reverse()) await c.stop();
  await jaeger?.stop();
  rmSync(home, { recursive: true, force: true });
}
