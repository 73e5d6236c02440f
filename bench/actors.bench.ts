/**
 * Actor benchmark: actor method calls per second and p50/p99 through one sidecar child process
 * (`rt sidecar`, `POST /v1.0/actors/B/<id>/method/m`) to a bare app, against plain service
 * invocation of the same app through the same sidecar (`POST /v1.0/invoke/bench/method/m`), in
 * the same run, alternating. Each of `concurrency` workers calls an actor of its own, so turns
 * never queue: the figure is what the actor path (host lookup, activation, turn, the app's
 * `PUT /actors/...`) adds to a call, not contention. Target (issue 42): ≥ 0.8× plain invocation.
 *
 * The app is a bare node:http child answering 200 to both paths (and its /dapr/config). The
 * sidecar is the compiled build, as the image runs it (bench/lib.ts buildRt; BENCH_SOURCES=1:
 * the TypeScript sources). Run: node bench/actors.bench.ts (env BENCH_SECONDS,
 * BENCH_CONCURRENCY, BENCH_ROUNDS change the load).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { buildRt, closedLoop, closedLoopSettings, loadLine, medianRun, printTable, ratio, shortTempDir, startChild, type ClosedLoopResult, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';

const root = join(import.meta.dirname, '..');




/** The bare app: 200 "ok" to anything, its actor type in /dapr/config. */
const APP = `
const http = require('node:http');
const config = JSON.stringify({ entities: ['B'] });
http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url === '/dapr/config' || req.url === '/rt/config') { res.writeHead(200, { 'content-type': 'application/json' }); return res.end(config); }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

const { seconds, concurrency, rounds, durationMs } = closedLoopSettings();

const buildDir = shortTempDir();
process.on('exit', () => rmSync(buildDir, { recursive: true, force: true }));
const entry = process.env.BENCH_SOURCES === '1' ? join(root, 'cli/rt.ts') : buildRt(buildDir);
const [appPort, hp, gp] = [await freePort(), await freePort(), await freePort()];
const app = await startChild(process.execPath, ['-e', APP], { env: { PORT: String(appPort) }, readyUrl: `http://127.0.0.1:${appPort}/dapr/config` });
const sidecar = await startChild(process.execPath, [entry, 'sidecar', '--app-id', 'bench', '--app-port', String(appPort), '--http-port', String(hp), '--grpc-port', String(gp), '--log-level', 'warn'], {
  readyUrl: `http://127.0.0.1:${hp}/v1.0/healthz`,
});
const pool = new Pool(`http://127.0.0.1:${hp}`, { connections: concurrency, pipelining: 1 });
const body = '{"n":1}';
const headers = { 'content-type': 'application/json' };

async function actorCall(w: number): Promise<boolean> {
  const r = await pool.request({ path: `/v1.0/actors/B/a-${w}/method/m`, method: 'POST', headers, body });
  await r.body.dump();
  return r.statusCode === 200;
}

async function invokeCall(): Promise<boolean> {
  const r = await pool.request({ path: '/v1.0/invoke/bench/method/m', method: 'POST', headers, body });
  await r.body.dump();
  return r.statusCode === 200;
}

try {
  // the sidecar asks the app for its types once the app answers
  for (let i = 0; i < 200 && !(await actorCall(0).catch(() => false)); i++) await new Promise((r) => setTimeout(r, 50));
  await closedLoop(actorCall, concurrency, 1000);
  await closedLoop(invokeCall, concurrency, 1000);
  const actors: ClosedLoopResult[] = [];
  const invoke: ClosedLoopResult[] = [];
  for (let r = 0; r < rounds; r++) {
    actors.push(await closedLoop(actorCall, concurrency, durationMs));
    invoke.push(await closedLoop(invokeCall, concurrency, durationMs));
  }
  const a = medianRun(actors);
  const i = medianRun(invoke);
  const rows: Row[] = [
    { case: 'actor method call (HTTP, one actor per worker)', 'calls/s': a.perSec, 'p50 ms': a.p50Ms, 'p99 ms': a.p99Ms, errors: a.errors, 'vs invoke': ratio(a.perSec, i.perSec) },
    { case: 'anchor: /v1.0/invoke/bench/method/m, same sidecar and app', 'calls/s': i.perSec, 'p50 ms': i.p50Ms, 'p99 ms': i.p99Ms, errors: i.errors, 'vs invoke': '1.00×' },
  ];
  printTable(`actor calls through one sidecar to a bare app, ${concurrency} in flight, ${seconds} s per run, median of ${rounds} alternating runs`, rows);
  printTable('targets', [{ target: 'actor calls/s ≥ 0.8× plain invocation', measured: ratio(a.perSec, i.perSec), met: a.perSec >= 0.8 * i.perSec ? 'yes' : 'no' }]);
  console.log(`load average after the run: ${loadLine()}`);
} finally {
  await pool.close();
  await sidecar.stop();
  await app.stop();
}
