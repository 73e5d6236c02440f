/**
 * `rt operator` on a real kube-apiserver (test/services/kube.ts):
 * 1. reconcile: 1,000 Components across 50 namespaces exist; the operator (a child process) starts
 *    and writes every Ready condition. Anchor: `kubectl apply` of the same 1,000 objects (the API
 *    server's own write rate for as many writes).
 * 2. update latency: 100 sidecar connections (2 per namespace, TLS, TokenReview'd projected tokens);
 *    a Component is changed with one API call and the time until each connection of its namespace
 *    has the new snapshot is measured (p50/p99). Anchor: a plain watch on the same resource
 *    (what any controller sees). Target: p99 < 1 s.
 * 3. operator RSS with the 100 connections. Target: < 150 MB.
 * The operator runs as the image runs it: compiled JavaScript (tsc, as `npm run build`; no type
 * stripping, which adds ~19 MB), with the chart's operator.nodeOptions. RT_BENCH_OPERATOR_SOURCE=1
 * runs the .ts sources instead; RT_BENCH_OPERATOR_NODE_OPTIONS replaces the V8 flags.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as k8s from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { operatorClient, type ResourceSnapshot } from '../operator/src/proto.ts';
import { makeTestCa } from '../test/services/ca.ts';
import { startKube } from '../test/services/kube.ts';
import { freePort } from '../test/services/net.ts';
import { machineLine, percentile, printTable, ratio, rssMb, startChild } from './lib.ts';

const NAMESPACES = 50;
const PER_NAMESPACE = 20;
const SIDECARS_PER_NAMESPACE = 2;
const UPDATES = Number(process.env.RT_BENCH_UPDATES ?? 40);
const ROOT = join(import.meta.dirname, '..');

/** The operator compiled into `dir` the way `npm run build` does it; returns its CLI entry. */
function compileOperator(dir: string): string {
  const out = join(dir, 'dist');
  // a type error elsewhere in the tree (work in progress) still emits: only a missing output fails
  spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', out], { stdio: 'ignore' });
  if (!existsSync(join(out, 'cli/rt.js'))) throw new Error('tsc -p tsconfig.build.json emitted nothing');
  cpSync(join(ROOT, 'operator/proto'), join(out, 'operator/proto'), { recursive: true });
  for (const f of ['components.yaml', 'configurations.yaml', 'subscriptions.yaml', 'httpendpoints.yaml']) cpSync(join(ROOT, 'crds', f), join(out, 'crds', f));
  writeFileSync(join(out, 'package.json'), JSON.stringify({ name: 'rt', version: '0.0.0-bench', type: 'module', private: true }));
  symlinkSync(join(ROOT, 'node_modules'), join(out, 'node_modules'));
  return join(out, 'cli/rt.js');
}

console.log(machineLine());
const kube = await startKube({ controllers: false });
const ca = makeTestCa();
const dir = mkdtempSync(join(tmpdir(), 'rt-operator-bench-'));
const clients: grpc.Client[] = [];
let operator: Awaited<ReturnType<typeof startChild>> | undefined;
try {
  const kubectl = async (args: string[], input?: string) => {
    const r = await kube.kubectl(args, { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  await kubectl(['apply', '-f', join(ROOT, 'crds')]);
  await kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.rt.io']);
  const nss = Array.from({ length: NAMESPACES }, (_, i) => `bench-${i}`);
  const list = (items: object[]) => stringify({ apiVersion: 'v1', kind: 'List', items });
  await kubectl(['apply', '-f', '-'], list(nss.flatMap((ns) => [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }])));
  await kubectl(['apply', '-f', '-'], list(nss.map((ns) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: ns } }))));
  const component = (ns: string, i: number, generation = 0) => ({
    apiVersion: 'rt.io/v1alpha1',
    kind: 'Component',
    metadata: { name: `c${i}`, namespace: ns },
    spec: { type: i % 2 ? 'state.redis' : 'state.in-memory', version: 'v1', metadata: [{ name: 'redisHost', value: `redis-${generation}:6379` }] },
  });

  // 1. reconcile 1,000 Components
  const objects = nss.flatMap((ns) => Array.from({ length: PER_NAMESPACE }, (_, i) => component(ns, i)));
  const t0 = performance.now();
  await kubectl(['apply', '-f', '-'], list(objects));
  const applyMs = performance.now() - t0;

  writeFileSync(join(dir, 'tls.crt'), ca.cert);
  writeFileSync(join(dir, 'tls.key'), ca.key);
  const port = await freePort();
  const metricsPort = await freePort();
  const fromSource = !!process.env.RT_BENCH_OPERATOR_SOURCE;
  mkdirSync(join(dir, 'build'));
  const entry = fromSource ? join(ROOT, 'cli/rt.ts') : compileOperator(join(dir, 'build'));
  const nodeOptions = process.env.RT_BENCH_OPERATOR_NODE_OPTIONS ?? (parse(readFileSync(join(ROOT, 'charts/rt/values.yaml'), 'utf8')) as { operator: { nodeOptions?: string } }).operator.nodeOptions ?? '';
  console.log(`operator: ${fromSource ? 'the .ts sources (type stripping)' : 'compiled JavaScript, as in the image'}; NODE_OPTIONS="${nodeOptions}"`);
  const t1 = performance.now();
  operator = await startChild(
    process.execPath,
    [entry, 'operator', '--kubeconfig', kube.kubeconfig, '--grpc-port', String(port), '--listen-address', '127.0.0.1', '--tls-cert-file', join(dir, 'tls.crt'), '--tls-key-file', join(dir, 'tls.key'), '--metrics-port', String(metricsPort), '--log-level', 'error'],
    { readyUrl: `http://127.0.0.1:${metricsPort}/metrics`, timeoutMs: 60_000, env: { NODE_OPTIONS: nodeOptions } },
  );
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kube.kubeconfig);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  for (;;) {
    const all = (await custom.listClusterCustomObject({ group: 'rt.io', version: 'v1alpha1', plural: 'components' })) as { items: { status?: { observedGeneration?: number } }[] };
    if (all.items.filter((c) => c.status?.observedGeneration === 1).length === objects.length) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const reconcileMs = performance.now() - t1;
  printTable(`reconcile ${objects.length} Components across ${NAMESPACES} namespaces`, [
    { what: 'anchor: kubectl apply of the 1,000 objects', ms: applyMs, 'vs anchor': '1.00×' },
    { what: 'rt operator start → every Ready condition written (includes process start and first lists)', ms: reconcileMs, 'vs anchor': ratio(reconcileMs, applyMs) },
  ]);

  // 2. 100 connected sidecars
  const step = (what: string) => process.env.RT_BENCH_VERBOSE && console.error(`[operator bench] ${what}`);
  step('creating pods');
  await kubectl(
    ['apply', '-f', '-'],
    list(
      nss.flatMap((ns) =>
        Array.from({ length: SIDECARS_PER_NAMESPACE }, (_, j) => ({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `app-${j}`, namespace: ns, annotations: { 'rt.io/app-id': `app${j}` } },
          spec: { containers: [{ name: 'app', image: 'app:1' }] },
        })),
      ),
    ),
  );
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const pods = (await core.listPodForAllNamespaces()).items.filter((p) => p.metadata?.namespace?.startsWith('bench-'));
  step(`${pods.length} pods; connecting`);
  type Conn = { ns: string; snapshots: { at: number; snap: ResourceSnapshot }[] };
  const conns: Conn[] = [];
  for (const p of pods) {
    const tr = await core.createNamespacedServiceAccountToken({
      name: 'default',
      namespace: p.metadata!.namespace!,
      body: { spec: { audiences: ['rt.io/operator'], expirationSeconds: 3600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: p.metadata!.name, uid: p.metadata!.uid } } },
    });
    const client = operatorClient(`127.0.0.1:${port}`, grpc.credentials.createSsl(Buffer.from(ca.caPem)));
    clients.push(client);
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${tr.status!.token}`);
    const conn: Conn = { ns: p.metadata!.namespace!, snapshots: [] };
    const call = client.WatchResources({ namespace: conn.ns, appId: '', podName: '' }, md);
    call.on('data', (snap: ResourceSnapshot) => conn.snapshots.push({ at: performance.now(), snap }));
    call.on('error', () => undefined);
    conns.push(conn);
  }
  while (conns.some((c) => c.snapshots.length === 0)) await new Promise((r) => setTimeout(r, 50));
  step('all connected');

  // the anchor: a plain watch of the same Components
  const watchSeen = new Map<string, number>();
  type Obj = k8s.KubernetesObject & { spec: { metadata: { value: string }[] } };
  const informer = k8s.makeInformer<Obj>(kc, '/apis/rt.io/v1alpha1/components', () => custom.listClusterCustomObject({ group: 'rt.io', version: 'v1alpha1', plural: 'components' }) as never);
  const seen = (obj: Obj) => {
    const key = `${obj.metadata!.namespace}/${obj.metadata!.name}/${obj.spec.metadata[0].value}`;
    if (!watchSeen.has(key)) watchSeen.set(key, performance.now());
  };
  informer.on('update', seen);
  informer.on('add', seen);
  await informer.start();

  const operatorLat: number[] = [];
  const watchLat: number[] = [];
  for (let u = 1; u <= UPDATES; u++) {
    const ns = nss[u % NAMESPACES];
    const value = `redis-${u}:6379`;
    const mine = conns.filter((c) => c.ns === ns);
    const before = mine.map((c) => c.snapshots.length);
    const start = performance.now();
    await custom.patchNamespacedCustomObject(
      { group: 'rt.io', version: 'v1alpha1', namespace: ns, plural: 'components', name: 'c0', body: { spec: { metadata: [{ name: 'redisHost', value }] } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const has = (s: ResourceSnapshot) => s.resources.some((r) => r.name === 'c0' && Buffer.from(r.json).toString().includes(value));
    step(`update ${u} sent`);
    for (let spins = 0; ; spins++) {
      const done = mine.every((c, i) => c.snapshots.slice(before[i]).some((x) => has(x.snap)));
      if (done && watchSeen.has(`${ns}/c0/${value}`)) break;
      if (spins % 1000 === 999) step(`waiting: sidecars ${done}, watch ${watchSeen.has(`${ns}/c0/${value}`)} (${mine.length} conns, ${[...watchSeen.keys()].slice(-2)})`);
      await new Promise((r) => setTimeout(r, 2));
    }
    mine.forEach((c, i) => operatorLat.push(c.snapshots.slice(before[i]).find((x) => has(x.snap))!.at - start));
    watchLat.push(watchSeen.get(`${ns}/c0/${value}`)! - start);
  }
  await informer.stop();
  const s1 = [...operatorLat].sort((a, b) => a - b);
  const s2 = [...watchLat].sort((a, b) => a - b);
  printTable(`kubectl-equivalent PATCH of a Component → connected sidecars have it (${conns.length} connected, ${UPDATES} updates)`, [
    { path: 'anchor: a plain API watch of components.rt.io', p50_ms: percentile(s2, 50), p99_ms: percentile(s2, 99), samples: s2.length },
    { path: 'rt operator → sidecar stream (TLS)', p50_ms: percentile(s1, 50), p99_ms: percentile(s1, 99), samples: s1.length, 'p99 vs anchor': ratio(percentile(s1, 99), percentile(s2, 99)), 'target p99 ms': 1000 },
  ]);

  const rss = rssMb(operator.proc.pid!);
  printTable('operator memory', [{ what: `rt operator RSS with ${objects.length} Components and ${conns.length} sidecars connected`, MB: rss, 'target MB': 150, 'vs target': ratio(rss, 150) }]);
  // where it goes, as the operator's own metrics report it (V8 heap, buffers outside it)
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const gauge = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN) / 2 ** 20;
  printTable('operator memory breakdown (its /metrics)', [
    { what: 'V8 heap used', MB: gauge('rt_operator_nodejs_heap_size_used_bytes') },
    { what: 'V8 heap total (reserved)', MB: gauge('rt_operator_nodejs_heap_size_total_bytes') },
    { what: 'external (Buffers, TLS)', MB: gauge('rt_operator_nodejs_external_memory_bytes') },
  ]);
  if (process.env.RT_BENCH_OPERATOR_HEAPSNAPSHOT) {
    // with RT_BENCH_OPERATOR_NODE_OPTIONS=--heapsnapshot-signal=SIGUSR2: a snapshot in the operator's cwd
    operator.proc.kill('SIGUSR2');
    await new Promise((r) => setTimeout(r, 15_000));
  }
} finally {
  for (const c of clients) c.close();
  await operator?.stop();
  await kube.stop();
  ca.remove();
  rmSync(dir, { recursive: true, force: true });
}
