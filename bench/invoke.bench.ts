/**
 * Service invocation benchmark: app → sidecar → sidecar → app (two `rt sidecar` child
 * processes found through a private local registry, the internal port between them: HTTP/1.1 over its Unix socket)
 * against the anchor, the calling app calling the other app directly.
 *
 * Prints the p50 and p99 each path takes at a steady 1,000 req/s (and what the sidecars add),
 * and the most req/s at 32 in flight. Targets (issue 21): added p50 ≤ 0.5 ms (the reference
 * runtime publishes +1.06 ms on a cluster), throughput ≥ 40% of direct.
 *
 * The same path with mutual TLS between the sidecars (`--enable-mtls`, certificates of the local CA
 * under the bench's RT_HOME) runs beside it, interleaved: the issue 35 targets are added p50 ≤ +0.15 ms
 * at 1,000 req/s and throughput ≥ 0.85× of plaintext at 32 in flight.
 *
 * A third path is the floor any pair of Node proxies pays: two bare `node:http` servers forwarding
 * through undici's dispatch API (the second over a Unix socket, as the sidecars do), nothing else.
 * The same floor runs with mutual TLS on its inner hop (ECDSA P-256 certificates of one CA, the
 * client's checked, as between the sidecars): what Node's TLS costs two bare proxies is the
 * ceiling of the mTLS ratios, measured in the same run.
 *
 * Run: node bench/invoke.bench.ts   (env BENCH_SECONDS changes the length of each run;
 * BENCH_CPU_PROF=<dir> writes a .cpuprofile of each sidecar there, named after its app id)
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueFor } from '../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../sidecar/src/identity/x509.ts';
import { freePort } from '../test/services/net.ts';
import { load, machineLine, printTable, ratio, startChild, type Child, type LoadResult } from './lib.ts';

const root = join(import.meta.dirname, '..');
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const profDir = process.env.BENCH_CPU_PROF;
const APP = `require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{"ok":true,"n":42}'); }); }).listen(Number(process.env.PORT), '127.0.0.1');`;

/**
 * The floor: a bare node:http server that forwards each request through undici's dispatch API —
 * over a Unix socket (SOCK_OUT) or to 127.0.0.1:OUT — and listens on PORT or the socket SOCK_IN.
 */
const PROXY = `const http = require('node:http'); const { Pool } = require(process.env.UNDICI);
const tls = process.env.TLS_DIR && ((n) => require('node:fs').readFileSync(process.env.TLS_DIR + '/' + n));
const pool = process.env.SOCK_OUT
  ? new Pool(tls ? 'https://localhost' : 'http://localhost', { socketPath: process.env.SOCK_OUT, connections: 256, ...(tls ? { connect: { key: tls('caller.key'), cert: tls('caller.crt'), ca: tls('ca.crt'), checkServerIdentity: () => undefined } } : {}) })
  : new Pool('http://127.0.0.1:' + process.env.OUT, { connections: 128 });
const forward = (req, res) => pool.dispatch({ method: req.method, path: req.url, headers: { 'x-hop': '1' } }, {
  onRequestStart() {}, onResponseStart(c, status, headers) { res.writeHead(status, headers); }, onResponseData(c, d) { res.write(d); },
  onResponseEnd() { res.end(); }, onResponseError(c, e) { res.destroy(e); } });
const server = tls && process.env.SOCK_IN
  ? require('node:https').createServer({ key: tls('target.key'), cert: tls('target.crt'), ca: tls('ca.crt'), requestCert: true, rejectUnauthorized: true }, forward)
  : http.createServer(forward);
server.listen(process.env.SOCK_IN ?? Number(process.env.PORT), process.env.SOCK_IN ? undefined : '127.0.0.1');
if (process.env.SOCK_IN) http.createServer((q, r) => r.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');`;

/** CPU time of a process so far, in µs (utime + stime from /proc, in clock ticks of 10 ms). */
function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** [load generator, app, then the given processes] CPU µs per call over a 3 s closed-loop run. */
async function cpuPerCall(url: string, procs: Child[]): Promise<number[]> {
  const pids = procs.map((c) => c.proc.pid!);
  const before = pids.map(cpuOf);
  const self = process.cpuUsage();
  const r = await load({ url, durationMs: 3000, concurrency: 8 });
  const own = process.cpuUsage(self);
  const used = pids.map((p, i) => cpuOf(p) - before[i]);
  return [own.user + own.system, ...used].map((us) => us / r.requests);
}

/** A CA and a certificate each for the TLS floor's two proxies, as PEM files in `dir`. */
async function floorCertificates(dir: string): Promise<void> {
  mkdirSync(dir);
  const ca = await createRootCa({ ttlMs: 3_600_000 });
  writeFileSync(join(dir, 'ca.crt'), ca.certPem);
  for (const appId of ['caller', 'target']) {
    const key = newWorkloadKey();
    const id = { trustDomain: 'bench.local', namespace: 'default', appId };
    const issued = await issueFor({ trustDomain: id.trustDomain, ca, trustBundlePem: ca.certPem, ttlMs: 3_600_000 }, { namespace: id.namespace, appId }, { id: appId, namespace: id.namespace, trustDomain: id.trustDomain, csrPem: await createCsr(key, id) });
    writeFileSync(join(dir, `${appId}.key`), key.keyPem);
    writeFileSync(join(dir, `${appId}.crt`), issued.certPem);
  }
}

const home = mkdtempSync(join(tmpdir(), 'rt-bench-invoke-'));
const children: Child[] = [];
try {
  const [appPort, targetHttp, callerHttp] = [await freePort(), await freePort(), await freePort()];
  children.push(await startChild(process.execPath, ['-e', APP], { env: { PORT: String(appPort) }, readyUrl: `http://127.0.0.1:${appPort}/` }));
  const sidecar = (id: string, http: number, extra: string[]) =>
    startChild(process.execPath, [...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${id}.cpuprofile`] : []), join(root, 'cli/rt.ts'), 'sidecar', '--app-id', id, '--http-port', String(http), '--grpc-port', '0', '--disable-metrics', '--log-level', 'warn', '--data-dir', join(home, id), ...extra], {
      env: { RT_HOME: home },
      readyUrl: `http://127.0.0.1:${http}/v1.0/healthz`,
      timeoutMs: 60_000,
    });
  children.push(await sidecar('target', targetHttp, ['--app-port', String(appPort)]));
  children.push(await sidecar('caller', callerHttp, []));
  // the same pair with mutual TLS on the internal port (TLS over its Unix socket too)
  const [mtlsTargetHttp, mtlsCallerHttp] = [await freePort(), await freePort()];
  const mtlsSidecars = [await sidecar('mtls-target', mtlsTargetHttp, ['--app-port', String(appPort), '--enable-mtls']), await sidecar('mtls-caller', mtlsCallerHttp, ['--enable-mtls'])];
  const [floorT, floorC] = [await freePort(), await freePort()];
  const undici = join(root, 'node_modules/undici/index.js');
  const floorSock = join(home, 'floor.sock');
  const floor = [
    await startChild(process.execPath, ['-e', PROXY], { env: { PORT: String(floorT), OUT: String(appPort), SOCK_IN: floorSock, UNDICI: undici }, readyUrl: `http://127.0.0.1:${floorT}/` }),
  ];
  floor.push(await startChild(process.execPath, ['-e', PROXY], { env: { PORT: String(floorC), SOCK_OUT: floorSock, UNDICI: undici }, readyUrl: `http://127.0.0.1:${floorC}/` }));
  // the floor again, mutual TLS on its inner hop
  const tlsDir = join(home, 'floor-tls');
  await floorCertificates(tlsDir);
  const [tlsFloorT, tlsFloorC] = [await freePort(), await freePort()];
  const tlsFloorSock = join(home, 'floor-tls.sock');
  const tlsFloor = [await startChild(process.execPath, ['-e', PROXY], { env: { PORT: String(tlsFloorT), OUT: String(appPort), SOCK_IN: tlsFloorSock, UNDICI: undici, TLS_DIR: tlsDir }, readyUrl: `http://127.0.0.1:${tlsFloorT}/` })];
  tlsFloor.push(await startChild(process.execPath, ['-e', PROXY], { env: { PORT: String(tlsFloorC), SOCK_OUT: tlsFloorSock, UNDICI: undici, TLS_DIR: tlsDir }, readyUrl: `http://127.0.0.1:${tlsFloorC}/` }));
  children.push(...floor, ...mtlsSidecars, ...tlsFloor);

  const direct = `http://127.0.0.1:${appPort}/ping`;
  const via = `http://127.0.0.1:${callerHttp}/v1.0/invoke/target/method/ping`;
  const bare = `http://127.0.0.1:${floorC}/ping`;
  const viaMtls = `http://127.0.0.1:${mtlsCallerHttp}/v1.0/invoke/mtls-target/method/ping`;
  const bareTls = `http://127.0.0.1:${tlsFloorC}/ping`;
  // warm the paths (connections, JIT)
  await load({ url: direct, durationMs: 1000 });
  await load({ url: via, durationMs: 2000 });
  await load({ url: viaMtls, durationMs: 2000 });
  await load({ url: bare, durationMs: 2000 });
  await load({ url: bareTls, durationMs: 2000 });
  const probe = await load({ url: bareTls, durationMs: 300 });
  if (probe.errors > 0 || probe.requests === 0) throw new Error('the TLS floor does not answer');

  // alternate the paths, three runs each, and keep each one's median, so load from other work hits both
  const runs = { lightD: [] as LoadResult[], lightV: [] as LoadResult[], steadyD: [] as LoadResult[], steadyV: [] as LoadResult[], steadyF: [] as LoadResult[], maxD: [] as LoadResult[], maxV: [] as LoadResult[], maxF: [] as LoadResult[], steadyM: [] as LoadResult[], maxM: [] as LoadResult[], lightM: [] as LoadResult[], lightF: [] as LoadResult[], lightFT: [] as LoadResult[], steadyFT: [] as LoadResult[], maxFT: [] as LoadResult[] };
  const ms = seconds * 1000;
  for (let i = 0; i < 3; i++) {
    // 100 req/s: what a call costs when nothing queues (on a shared machine 1,000 req/s may not be)
    runs.lightD.push(await load({ url: direct, durationMs: ms, rate: 100, concurrency: 64 }));
    runs.lightV.push(await load({ url: via, durationMs: ms, rate: 100, concurrency: 64 }));
    runs.lightM.push(await load({ url: viaMtls, durationMs: ms, rate: 100, concurrency: 64 }));
    runs.lightF.push(await load({ url: bare, durationMs: ms, rate: 100, concurrency: 64 }));
    runs.lightFT.push(await load({ url: bareTls, durationMs: ms, rate: 100, concurrency: 64 }));
    runs.steadyD.push(await load({ url: direct, durationMs: ms, rate: 1000, concurrency: 64 }));
    runs.steadyV.push(await load({ url: via, durationMs: ms, rate: 1000, concurrency: 64 }));
    runs.steadyM.push(await load({ url: viaMtls, durationMs: ms, rate: 1000, concurrency: 64 }));
    runs.steadyF.push(await load({ url: bare, durationMs: ms, rate: 1000, concurrency: 64 }));
    runs.steadyFT.push(await load({ url: bareTls, durationMs: ms, rate: 1000, concurrency: 64 }));
    runs.maxD.push(await load({ url: direct, durationMs: ms, concurrency: 32 }));
    runs.maxV.push(await load({ url: via, durationMs: ms, concurrency: 32 }));
    runs.maxM.push(await load({ url: viaMtls, durationMs: ms, concurrency: 32 }));
    runs.maxF.push(await load({ url: bare, durationMs: ms, concurrency: 32 }));
    runs.maxFT.push(await load({ url: bareTls, durationMs: ms, concurrency: 32 }));
  }
  // CPU each process spends per call (Linux /proc, the load generator by process.cpuUsage): the
  // share of each hop, and on a CPU-bound machine the ceiling of the throughput ratio
  const [app, target, caller, floorTarget, floorCaller, mtlsTarget, mtlsCaller, tlsFloorTarget, tlsFloorCaller] = children;
  const cpuRuns = { direct: await cpuPerCall(direct, [app]), via: await cpuPerCall(via, [app, target, caller]), bare: await cpuPerCall(bare, [app, floorTarget, floorCaller]), mtls: await cpuPerCall(viaMtls, [app, mtlsTarget, mtlsCaller]), bareTls: await cpuPerCall(bareTls, [app, tlsFloorTarget, tlsFloorCaller]) };

  const pick = (rs: LoadResult[], k: 'p50Ms' | 'p99Ms' | 'rps') => [...rs].sort((a, b) => a[k] - b[k])[1];
  const { lightD, lightV, steadyD, steadyV, steadyF, maxD, maxV, maxF } = runs;
  const [l1, lv1, l99, lv99] = [pick(lightD, 'p50Ms'), pick(lightV, 'p50Ms'), pick(lightD, 'p99Ms'), pick(lightV, 'p99Ms')];
  const [d1, v1] = [pick(steadyD, 'p50Ms'), pick(steadyV, 'p50Ms')];
  const [d99, v99] = [pick(steadyD, 'p99Ms'), pick(steadyV, 'p99Ms')];
  const [f1, f99] = [pick(steadyF, 'p50Ms'), pick(steadyF, 'p99Ms')];
  const [dMax, vMax, fMax] = [pick(maxD, 'rps'), pick(maxV, 'rps'), pick(maxF, 'rps')];
  const [m1, m99, mMax, lm1] = [pick(runs.steadyM, 'p50Ms'), pick(runs.steadyM, 'p99Ms'), pick(runs.maxM, 'rps'), pick(runs.lightM, 'p50Ms')];
  const [lf1, ft1, ft99, ftMax, lft1] = [pick(runs.lightF, 'p50Ms'), pick(runs.steadyFT, 'p50Ms'), pick(runs.steadyFT, 'p99Ms'), pick(runs.maxFT, 'rps'), pick(runs.lightFT, 'p50Ms')];

  console.log(machineLine());
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')}`);
  printTable('invoke — at a steady 1,000 req/s (median of 3 runs each)', [
    { path: 'anchor: app → app directly', 'p50 ms': d1.p50Ms, 'p99 ms': d99.p99Ms, errors: d1.errors + d99.errors },
    { path: 'app → sidecar → sidecar → app', 'p50 ms': v1.p50Ms, 'p99 ms': v99.p99Ms, errors: v1.errors + v99.errors },
    { path: 'added by the two sidecars', 'p50 ms': v1.p50Ms - d1.p50Ms, 'p99 ms': v99.p99Ms - d99.p99Ms, errors: '' },
    { path: 'target (added p50)', 'p50 ms': 0.5, 'p99 ms': '', errors: '' },
    { path: 'floor: app → bare proxy → bare proxy → app', 'p50 ms': f1.p50Ms, 'p99 ms': f99.p99Ms, errors: f1.errors + f99.errors },
    { path: 'added by the two bare proxies', 'p50 ms': f1.p50Ms - d1.p50Ms, 'p99 ms': f99.p99Ms - d99.p99Ms, errors: '' },
  ]);
  printTable('invoke — at 100 req/s, nothing queued (median of 3 runs each)', [
    { path: 'anchor: app → app directly', 'p50 ms': l1.p50Ms, 'p99 ms': l99.p99Ms, errors: l1.errors },
    { path: 'app → sidecar → sidecar → app', 'p50 ms': lv1.p50Ms, 'p99 ms': lv99.p99Ms, errors: lv1.errors },
    { path: 'added by the two sidecars', 'p50 ms': lv1.p50Ms - l1.p50Ms, 'p99 ms': lv99.p99Ms - l99.p99Ms, errors: '' },
  ]);
  printTable('invoke — most req/s at 32 in flight (median of 3 runs each)', [
    { path: 'anchor: app → app directly', 'req/s': dMax.rps, 'p50 ms': dMax.p50Ms, 'p99 ms': dMax.p99Ms, errors: dMax.errors, 'vs direct': '1.00×' },
    { path: 'app → sidecar → sidecar → app', 'req/s': vMax.rps, 'p50 ms': vMax.p50Ms, 'p99 ms': vMax.p99Ms, errors: vMax.errors, 'vs direct': ratio(vMax.rps, dMax.rps) },
    { path: 'target', 'req/s': '', 'p50 ms': '', 'p99 ms': '', errors: '', 'vs direct': '≥ 0.40×' },
    { path: 'floor: app → bare proxy → bare proxy → app', 'req/s': fMax.rps, 'p50 ms': fMax.p50Ms, 'p99 ms': fMax.p99Ms, errors: fMax.errors, 'vs direct': ratio(fMax.rps, dMax.rps) },
  ]);
  printTable('invoke — mutual TLS between the sidecars against plaintext (median of 3 runs each, interleaved)', [
    { path: 'plaintext: app → sidecar → sidecar → app', 'p50 ms at 1,000 req/s': v1.p50Ms, 'p99 ms at 1,000 req/s': v99.p99Ms, 'p50 ms at 100 req/s': lv1.p50Ms, 'req/s at 32 in flight': vMax.rps, errors: v1.errors + vMax.errors },
    { path: 'mTLS: the same with --enable-mtls', 'p50 ms at 1,000 req/s': m1.p50Ms, 'p99 ms at 1,000 req/s': m99.p99Ms, 'p50 ms at 100 req/s': lm1.p50Ms, 'req/s at 32 in flight': mMax.rps, errors: m1.errors + mMax.errors },
    { path: 'mTLS − plaintext, mTLS ÷ plaintext', 'p50 ms at 1,000 req/s': m1.p50Ms - v1.p50Ms, 'p99 ms at 1,000 req/s': m99.p99Ms - v99.p99Ms, 'p50 ms at 100 req/s': lm1.p50Ms - lv1.p50Ms, 'req/s at 32 in flight': ratio(mMax.rps, vMax.rps), errors: '' },
    { path: 'target', 'p50 ms at 1,000 req/s': '≤ +0.15', 'p99 ms at 1,000 req/s': '', 'p50 ms at 100 req/s': '', 'req/s at 32 in flight': '≥ 0.85×', errors: '' },
    { path: 'floor, plaintext: two bare proxies', 'p50 ms at 1,000 req/s': f1.p50Ms, 'p99 ms at 1,000 req/s': f99.p99Ms, 'p50 ms at 100 req/s': lf1.p50Ms, 'req/s at 32 in flight': fMax.rps, errors: f1.errors + fMax.errors },
    { path: 'floor, mutual TLS on the inner hop', 'p50 ms at 1,000 req/s': ft1.p50Ms, 'p99 ms at 1,000 req/s': ft99.p99Ms, 'p50 ms at 100 req/s': lft1.p50Ms, 'req/s at 32 in flight': ftMax.rps, errors: ft1.errors + ftMax.errors },
    { path: 'floor: mTLS − plaintext, mTLS ÷ plaintext (the ceiling)', 'p50 ms at 1,000 req/s': ft1.p50Ms - f1.p50Ms, 'p99 ms at 1,000 req/s': ft99.p99Ms - f99.p99Ms, 'p50 ms at 100 req/s': lft1.p50Ms - lf1.p50Ms, 'req/s at 32 in flight': ratio(ftMax.rps, fMax.rps), errors: '' },
  ]);
  const [a, b, f, m] = [cpuRuns.direct, cpuRuns.via, cpuRuns.bare, cpuRuns.mtls];
  const total = (r: number[]) => r.reduce((x, y) => x + y, 0);
  printTable('invoke — CPU µs per call in each process (closed loop, 8 in flight)', [
    { path: 'anchor: app → app directly', 'load generator': a[0], 'target app': a[1], 'target sidecar': '', 'caller sidecar': '', total: total(a) },
    { path: 'app → sidecar → sidecar → app', 'load generator': b[0], 'target app': b[1], 'target sidecar': b[2], 'caller sidecar': b[3], total: total(b) },
    { path: 'direct ÷ via: throughput ceiling when CPU-bound', 'load generator': '', 'target app': '', 'target sidecar': '', 'caller sidecar': '', total: ratio(total(a), total(b)) },
    { path: 'app → sidecar → sidecar → app, mTLS', 'load generator': m[0], 'target app': m[1], 'target sidecar': m[2], 'caller sidecar': m[3], total: total(m) },
    { path: 'floor: bare proxies in the sidecars\' places', 'load generator': f[0], 'target app': f[1], 'target sidecar': f[2], 'caller sidecar': f[3], total: total(f) },
    { path: 'floor with mutual TLS on the inner hop', 'load generator': cpuRuns.bareTls[0], 'target app': cpuRuns.bareTls[1], 'target sidecar': cpuRuns.bareTls[2], 'caller sidecar': cpuRuns.bareTls[3], total: total(cpuRuns.bareTls) },
    { path: 'direct ÷ floor: the most two Node proxies allow', 'load generator': '', 'target app': '', 'target sidecar': '', 'caller sidecar': '', total: ratio(total(a), total(f)) },
  ]);
} finally {
  for (const c of children.reverse()) await c.stop();
  rmSync(home, { recursive: true, force: true });
}
