/**
 * Resiliency benchmark: what a policy costs a call that succeeds. The same calls through two
 * sidecars started alike, one with no Resiliency resource (the anchor) and one whose Resiliency
 * applies a timeout, a retry and a circuit breaker to the target, in the same run, alternating:
 * - state GET of one small value from an in-memory store (`targets.components.mem.outbound`);
 * - service invocation app → sidecar → sidecar → app (`targets.apps.target`), the callers each
 *   through their own sidecar to one target sidecar (no Resiliency) and its app.
 *
 * Prints req/s at 32 in flight with the ratio to the anchor, and the p50 and p99 at a steady
 * 1,000 req/s and at 100 req/s (nothing queued, which a busy machine may not manage at 1,000)
 * with what the policy adds, and the CPU µs per call of the sidecars crossed (less blurred by the
 * machine's other work than req/s). Sidecars run from the TypeScript sources (as the invoke
 * bench); both sides alike, so the ratio is the policy's.
 * Last, in this process, what the runner itself costs a call that succeeds (CPU µs per call of
 * the same policy around an operation that resolves at once, against the bare operation): a
 * figure that a busy machine does not blur the way it blurs the latencies through sidecars.
 *
 * Run: node bench/resiliency.bench.ts   (env BENCH_SECONDS, BENCH_ROUNDS change the load)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { Policies } from '../sidecar/src/resiliency/policies.ts';
import { runPolicy, type ResolvedPolicy } from '../sidecar/src/resiliency/run.ts';
import { componentCall, ResiliencyService } from '../sidecar/src/resiliency/service.ts';
import type { Resources } from '../sidecar/src/resources/types.ts';
import { pino } from 'pino';
import { parseResiliency } from '../sidecar/src/resiliency/spec.ts';
import { freePort } from '../test/services/net.ts';
import { load, machineLine, median, medianOfRuns, printTable, procCpuMs, ratio, startChild, type Child, type LoadResult, type Row } from './lib.ts';

const root = join(import.meta.dirname, '..');
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const APP = `require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{"ok":true,"n":42}'); }); }).listen(Number(process.env.PORT), '127.0.0.1');`;
const MEM = 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n';
// generous limits: every call succeeds, so what is measured is the policy's cost on the happy path
const RESILIENCY = `apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata:
  name: bench
spec:
  policies:
    timeouts:
      t: 5s
    retries:
      r: { policy: constant, duration: 100ms, maxRetries: 3 }
    circuitBreakers:
      cb: { maxRequests: 1, timeout: 30s, trip: consecutiveFailures > 5 }
  targets:
    apps:
      target: { timeout: t, retry: r, circuitBreaker: cb }
    components:
      mem:
        outbound: { timeout: t, retry: r, circuitBreaker: cb }
`;

/** A run's result with the CPU µs per request of the sidecars it crossed (`pids`). */
type Measured = LoadResult & { cpuUs: number };

/** `run` with the CPU the processes `pids` spent on it, per request. */
async function withCpu(pids: number[], run: () => Promise<LoadResult>): Promise<Measured> {
  const cpu = () => pids.reduce((n, pid) => n + procCpuMs(pid), 0);
  const before = cpu();
  const r = await run();
  return { ...r, cpuUs: ((cpu() - before) * 1000) / Math.max(1, r.requests) };
}

/**
 * Anchor and policy runs alternately, `rounds` each: [anchor, policy, median of the rounds' policy ÷
 * anchor req/s, median CPU µs per request of the anchor's sidecars, of the policy's].
 */
async function pair(anchor: () => Promise<Measured>, policy: () => Promise<Measured>): Promise<[LoadResult, LoadResult, number, number, number]> {
  const a: Measured[] = [];
  const p: Measured[] = [];
  for (let i = 0; i < rounds; i++) {
    a.push(await anchor());
    p.push(await policy());
  }
  return [medianOfRuns(a), medianOfRuns(p), median(p.map((r, i) => r.rps / a[i].rps)), median(a.map((r) => r.cpuUs)), median(p.map((r) => r.cpuUs))];
}

/** CPU µs per call of `call`, run `n` times one after another (after a warm-up of as many). */
async function cpuPerCall(call: () => Promise<unknown>, n: number): Promise<number> {
  for (let i = 0; i < n; i++) await call();
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) await call();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

/**
 * The policy's own cost, in this process: the same policy as the guarded sidecar's store around an
 * operation that resolves at once, through the runner alone and through componentCall as a state
 * call makes it (the policy looked up for the component, the tries counted).
 */
async function runnerCost(): Promise<Row[]> {
  const doc = parse(RESILIENCY) as { metadata: { name: string }; spec: unknown };
  const spec = parseResiliency(doc.metadata.name, [], doc.spec, (field, problem) => {
    throw new Error(`${field}: ${problem}`);
  });
  const policy = new Policies([spec], 'bench').forComponent('mem', 'state.in-memory', 'Outbound') as ResolvedPolicy;
  const service = new ResiliencyService({ resiliencies: [spec] } as unknown as Resources, 'bench', pino({ level: 'silent' }));
  const components = { get: (name: string) => (name === 'mem' ? { spec: { type: 'state.in-memory' } } : undefined) };
  const op = () => Promise.resolve(42);
  const n = 200_000;
  const rows: Row[] = [];
  for (let i = 0; i < 3; i++) {
    const bare = await cpuPerCall(op, n);
    const guarded = await cpuPerCall(() => runPolicy(policy, op), n);
    const call = await cpuPerCall(() => componentCall(service, components, 'mem', 'Outbound', op), n);
    rows.push({ round: i + 1, 'bare operation µs': bare, 'runner µs': guarded, 'runner adds µs': guarded - bare, 'componentCall µs': call, 'componentCall adds µs': call - bare });
  }
  return rows;
}

const home = mkdtempSync(join(tmpdir(), 'rt-bench-resiliency-'));
const children: Child[] = [];
try {
  console.log(machineLine());
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  const appPort = await freePort();
  children.push(await startChild(process.execPath, ['-e', APP], { env: { PORT: String(appPort) }, readyUrl: `http://127.0.0.1:${appPort}/` }));
  const sidecar = async (id: string, resources: string[], extra: string[] = []) => {
    const dir = join(home, `${id}-resources`);
    mkdirSync(dir);
    resources.forEach((y, i) => writeFileSync(join(dir, `${i}.yaml`), y));
    const http = await freePort();
    const child = await startChild(process.execPath, [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', id, '--http-port', String(http), '--grpc-port', '0', '--disable-metrics', '--log-level', 'warn', '--data-dir', join(home, id), '--resources-path', dir, ...extra], {
        env: { RT_HOME: home },
        readyUrl: `http://127.0.0.1:${http}/v1.0/healthz`,
        timeoutMs: 60_000,
      });
    children.push(child);
    return { url: `http://127.0.0.1:${http}`, pid: child.proc.pid! };
  };
  const target = await sidecar('target', [], ['--app-port', String(appPort)]);
  const plainSidecar = await sidecar('plain', [MEM]);
  const guardedSidecar = await sidecar('guarded', [MEM, RESILIENCY]);
  const [plain, guarded] = [plainSidecar.url, guardedSidecar.url];
  // the sidecars a call crosses: the caller's; for invoke also the target's
  const pidsOf = (base: string, invoke: boolean) => [base === plain ? plainSidecar.pid : guardedSidecar.pid, ...(invoke ? [target.pid] : [])];
  for (const base of [plain, guarded]) {
    const saved = await fetch(`${base}/v1.0/state/mem`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: { id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true } }]) });
    if (saved.status !== 204) throw new Error(`could not seed the store of ${base}: ${saved.status}`);
  }
  const md = (await (await fetch(`${guarded}/v1.0/metadata`)).json()) as { resiliency?: { resources: string[] } };
  if (md.resiliency?.resources[0] !== 'bench') throw new Error('the guarded sidecar has not loaded its Resiliency resource');

  const stateUrl = (base: string) => `${base}/v1.0/state/mem/k`;
  const invokeUrl = (base: string) => `${base}/v1.0/invoke/target/method/ping`;
  const ms = seconds * 1000;
  // warm both paths of both sidecars (JIT, connections)
  for (const base of [plain, guarded]) {
    await load({ url: stateUrl(base), durationMs: 1500 });
    await load({ url: invokeUrl(base), durationMs: 1500 });
  }
  const closed = (url: string, pids: number[]) => () => withCpu(pids, () => load({ url, durationMs: ms, concurrency: 32 }));
  const steady = (url: string, rate: number) => () => withCpu([], () => load({ url, durationMs: ms, rate, concurrency: 64 }));

  const rows: Row[] = [];
  const steadyRows: Row[] = [];
  const lightRows: Row[] = [];
  const added = (what: string, a: LoadResult, p: LoadResult): Row => ({ case: what, 'p50 ms anchor': a.p50Ms, 'p50 ms policy': p.p50Ms, 'added p50 ms': p.p50Ms - a.p50Ms, 'p99 ms anchor': a.p99Ms, 'p99 ms policy': p.p99Ms, 'added p99 ms': p.p99Ms - a.p99Ms, errors: a.errors + p.errors });
  for (const [what, url, invoke] of [
    ['state GET (in-memory)', stateUrl, false],
    ['invoke (app → sidecar → sidecar → app)', invokeUrl, true],
  ] as const) {
    const [a, p, r, cpuA, cpuP] = await pair(closed(url(plain), pidsOf(plain, invoke)), closed(url(guarded), pidsOf(guarded, invoke)));
    rows.push({ case: what, 'no Resiliency req/s': a.rps, 'with policy req/s': p.rps, 'policy ÷ anchor': `${r.toFixed(2)}×`, 'ratio of medians': ratio(p.rps, a.rps), 'CPU µs/call anchor': cpuA, 'CPU µs/call policy': cpuP, 'added CPU µs': cpuP - cpuA, 'p50 ms anchor': a.p50Ms, 'p50 ms policy': p.p50Ms, errors: a.errors + p.errors });
    steadyRows.push(added(what, ...(await pair(steady(url(plain), 1000), steady(url(guarded), 1000))).slice(0, 2) as [LoadResult, LoadResult]));
    lightRows.push(added(what, ...(await pair(steady(url(plain), 100), steady(url(guarded), 100))).slice(0, 2) as [LoadResult, LoadResult]));
  }
  printTable(`resiliency — most req/s at 32 in flight, timeout + retry + circuit breaker on the target against no Resiliency (median of ${rounds} alternating ${seconds} s runs)`, rows);
  printTable(`resiliency — at a steady 1,000 req/s (median of ${rounds} alternating ${seconds} s runs)`, steadyRows);
  printTable(`resiliency — at 100 req/s, nothing queued (median of ${rounds} alternating ${seconds} s runs)`, lightRows);
  printTable('resiliency — the policy alone, in process: CPU per call of 200,000 calls one after another (the runner; componentCall as a state call makes it)', await runnerCost());
  console.log(`load average after the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')}`);
} finally {
  for (const c of children.reverse()) await c.stop();
  rmSync(home, { recursive: true, force: true });
}
