/**
 * gRPC runtime API benchmark: GetState and SaveState of one small JSON value on an in-memory
 * store through a sidecar child process (`rt sidecar`), over gRPC (dapr.proto.runtime.v1.Dapr)
 * and over the HTTP API, against the anchor: a bare grpc-js server (also a child process)
 * answering the same messages from a Map, loaded from the same protos.
 *
 * Prints req/s, p50 and p99 at fixed concurrency (closed loop), median of alternating rounds.
 * The gRPC load comes from BENCH_GRPC_THREADS worker threads (default 2), HTTP load from undici.
 * Run: node bench/grpc.bench.ts   (env BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_ROUNDS change the load)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { runtimeClient, runtimeService } from '../sidecar/src/grpc/runtime/proto.ts';
import { load, machineLine, percentile, printTable, ratio, startChild, type LoadResult, type Row } from './lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const VALUE = Buffer.from(JSON.stringify({ id: 42, name: 'benchmark', tags: ['a', 'b'], ok: true }));
const SAVE_HTTP = JSON.stringify([{ key: 'k', value: JSON.parse(VALUE.toString()) }]);
const SAVE_GRPC = { store_name: 'mem', states: [{ key: 'k', value: VALUE }] };
const GET_GRPC = { store_name: 'mem', key: 'k' };
const THREADS = Number(process.env.BENCH_GRPC_THREADS ?? 2);

if (!isMainThread) await loadWorker();
else if (process.argv[2] === '--serve-bare') await serveBare(Number(process.argv[3]));
else await main();

/** The anchor: GetState/SaveState with the same messages on a bare grpc-js server, values in a Map. */
async function serveBare(port: number): Promise<void> {
  const items = new Map<string, { value: Buffer; etag: number }>();
  const server = new grpc.Server();
  type Req = { store_name: string; key: string; states: { key: string; value: Buffer }[] };
  server.addService(runtimeService(), {
    GetState: (call: grpc.ServerUnaryCall<Req, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      const it = items.get(call.request.key);
      cb(null, { data: it?.value ?? Buffer.alloc(0), etag: it ? String(it.etag) : '', metadata: {} });
    },
    SaveState: (call: grpc.ServerUnaryCall<Req, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      for (const s of call.request.states) items.set(s.key, { value: s.value, etag: (items.get(s.key)?.etag ?? 0) + 1 });
      cb(null, {});
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  // a tiny HTTP readiness probe for startChild
  const { createServer } = await import('node:http');
  createServer((_q, r) => r.writeHead(204).end()).listen(Number(process.argv[4]), '127.0.0.1');
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

interface GrpcLoad {
  address: string;
  method: string;
  req: unknown;
  concurrency: number;
  durationMs: number;
}

/** One load thread: its own channel, `concurrency` calls in flight; posts the latencies. */
async function loadWorker(): Promise<void> {
  const { address, method, req, concurrency, durationMs } = workerData as GrpcLoad;
  const Client = runtimeClient();
  const client = new Client(address, grpc.credentials.createInsecure());
  const fn = (client as unknown as Record<string, (r: unknown, cb: (e: grpc.ServiceError | null) => void) => void>)[method].bind(client);
  const run = async (ms: number) => {
    const lat: number[] = [];
    let errors = 0;
    const start = performance.now();
    const end = start + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          const failed = await new Promise<boolean>((resolve) => fn(req, (e) => resolve(e !== null)));
          if (failed) errors++;
          lat.push(performance.now() - t0);
        }
      }),
    );
    return { lat, errors, seconds: (performance.now() - start) / 1000 };
  };
  await run(500); // a fresh thread: connect and warm the JIT first
  parentPort!.postMessage(await run(durationMs));
  client.close();
}

/**
 * Closed loop over gRPC from THREADS worker threads (a grpc-js client costs more CPU per call
 * than the server, so one thread would measure the client), `concurrency` calls in flight in all.
 */
async function loadGrpc(address: string, method: string, req: unknown, concurrency: number, durationMs: number): Promise<LoadResult> {
  const parts = await Promise.all(
    Array.from({ length: THREADS }, (_, i) => {
      const share = Math.floor(concurrency / THREADS) + (i < concurrency % THREADS ? 1 : 0);
      const w = new Worker(new URL(import.meta.url), { workerData: { address, method, req, concurrency: share, durationMs } satisfies GrpcLoad });
      return new Promise<{ lat: number[]; errors: number; seconds: number }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }).finally(() => w.terminate());
    }),
  );
  const lat = parts.flatMap((p) => p.lat).sort((a, b) => a - b);
  const errors = parts.reduce((n, p) => n + p.errors, 0);
  const rps = parts.reduce((n, p) => n + p.lat.length / p.seconds, 0);
  return { requests: lat.length, errors, rps, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
}

/** Runs the targets in turn for `rounds` rounds and keeps each one's median (shared-machine noise lands on all). */
async function rounds(targets: (() => Promise<LoadResult>)[], n: number): Promise<LoadResult[]> {
  const runs: LoadResult[][] = targets.map(() => []);
  for (let i = 0; i < n; i++) for (const [j, t] of targets.entries()) runs[j].push(await t());
  const mid = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  return runs.map((rs) => ({
    requests: rs.reduce((s, r) => s + r.requests, 0),
    errors: rs.reduce((s, r) => s + r.errors, 0),
    rps: mid(rs.map((r) => r.rps)),
    p50Ms: mid(rs.map((r) => r.p50Ms)),
    p99Ms: mid(rs.map((r) => r.p99Ms)),
  }));
}

async function main(): Promise<void> {
  console.log(machineLine());
  const seconds = Number(process.env.BENCH_SECONDS ?? 4);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const n = Number(process.env.BENCH_ROUNDS ?? 2);
  const durationMs = seconds * 1000;
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);

  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-grpc-'));
  writeFileSync(join(dir, 'mem.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n');
  const [hp, gp, bp, bh] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const sidecar = await startChild(
    process.execPath,
    [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', 'bench', '--http-port', String(hp), '--grpc-port', String(gp), '--resources-path', dir, '--data-dir', join(dir, 'data'), '--log-level', 'warn'],
    { readyUrl: `http://127.0.0.1:${hp}/v1.0/healthz` },
  );
  const bare = await startChild(process.execPath, [fileURLToPath(import.meta.url), '--serve-bare', String(bp), String(bh)], { readyUrl: `http://127.0.0.1:${bh}/` });
  const sc = `127.0.0.1:${gp}`;
  const bc = `127.0.0.1:${bp}`;

  try {
    const http = `http://127.0.0.1:${hp}/v1.0/state/mem`;
    const json = { 'content-type': 'application/json' };
    // seed and warm up every target (JIT, connections)
    for (const c of [sc, bc]) {
      await loadGrpc(c, 'SaveState', SAVE_GRPC, concurrency, 1000);
      await loadGrpc(c, 'GetState', GET_GRPC, concurrency, 1000);
    }
    await load({ url: `${http}/k`, concurrency, durationMs: 1000 });

    const [aGet, gGet, hGet] = await rounds(
      [() => loadGrpc(bc, 'GetState', GET_GRPC, concurrency, durationMs), () => loadGrpc(sc, 'GetState', GET_GRPC, concurrency, durationMs), () => load({ url: `${http}/k`, concurrency, durationMs })],
      n,
    );
    const [aSet, gSet, hSet] = await rounds(
      [
        () => loadGrpc(bc, 'SaveState', SAVE_GRPC, concurrency, durationMs),
        () => loadGrpc(sc, 'SaveState', SAVE_GRPC, concurrency, durationMs),
        () => load({ url: http, method: 'POST', headers: json, body: SAVE_HTTP, concurrency, durationMs }),
      ],
      n,
    );
    const row = (name: string, r: LoadResult, a: LoadResult): Row => ({
      case: name,
      'req/s': r.rps,
      'p50 ms': r.p50Ms,
      'p99 ms': r.p99Ms,
      errors: r.errors,
      'anchor req/s': a.rps,
      'anchor p99 ms': a.p99Ms,
      'vs anchor': ratio(r.rps, a.rps),
    });
    printTable(`GetState/SaveState, in-memory store, concurrency ${concurrency}, ${seconds} s per run, median of ${n} rounds; anchor = bare grpc-js server, same messages`, [
      row('GetState over gRPC (sidecar)', gGet, aGet),
      row('GET over HTTP (sidecar)', hGet, aGet),
      row('SaveState over gRPC (sidecar)', gSet, aSet),
      row('POST save over HTTP (sidecar)', hSet, aSet),
    ]);
  } finally {
    await sidecar.stop();
    await bare.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
