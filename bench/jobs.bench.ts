/**
 * Jobs benchmark: schedule calls/s through the sidecar HTTP API, triggers/s delivered to an
 * app, and trigger lateness (arrival at the app − due time) — for 10,000 jobs due in the same
 * second, and at a steady 1,000 triggers/s.
 *
 * Anchor: the Go runtime's scheduler as published (about 920 schedule calls/s and 19,000
 * triggers/s, measured on a cluster). Targets here: ≥ 1,000 schedules/s, ≥ 20,000 triggers/s,
 * p99 lateness ≤ 100 ms at 1,000 triggers/s.
 *
 * Two set-ups: `rt sidecar` with the scheduler in its own process without a network hop
 * (standalone default), and `rt run`, whose scheduler is a gRPC server on loopback.
 * The app (a plain node:http server) and the load generator run in this process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { Pool } from 'undici';
import { GrpcSchedulerClient } from '../scheduler/src/grpc/client.ts';
import { freePort, waitForPort } from '../test/services/net.ts';
import { machineLine, percentile, printTable, ratio, rssMb, startChild, type Row } from './lib.ts';

const RT = fileURLToPath(new URL('../cli/rt.ts', import.meta.url));
const ANCHOR_SCHEDULES = 920;
const ANCHOR_TRIGGERS = 19_000;
const BURST = 10_000;
const STEADY_RATE = 1000;
const STEADY_SECONDS = 5;

interface Arrival {
  name: string;
  at: number;
  due: number;
}

/** The app: records arrival time and the due time carried in the job's data. */
async function startApp(): Promise<{ port: number; arrivals: Arrival[]; close(): Promise<void> }> {
  const arrivals: Arrival[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      if (req.url?.startsWith('/job/')) {
        const body = Buffer.concat(chunks).toString();
        arrivals.push({ name: req.url.slice(5), at, due: body ? Number(JSON.parse(body)) : 0 });
      }
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    arrivals,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Closed loop of POSTs with a fresh job name each; returns calls/s. */
async function scheduleMany(base: string, count: number, concurrency: number, body: (i: number) => unknown, name: (i: number) => string): Promise<{ rps: number; errors: number; p50: number; p99: number }> {
  const pool = new Pool(base, { connections: concurrency });
  let next = 0;
  let errors = 0;
  const lat: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        const s = performance.now();
        const res = await pool.request({ method: 'POST', path: `/v1.0-alpha1/jobs/${name(i)}`, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body(i)) });
        await res.body.dump();
        if (res.statusCode !== 204) errors++;
        lat.push(performance.now() - s);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  await pool.close();
  lat.sort((a, b) => a - b);
  return { rps: count / secs, errors, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

async function waitArrivals(arr: Arrival[], prefix: string, n: number, timeoutMs: number): Promise<Arrival[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = arr.filter((a) => a.name.startsWith(prefix));
    if (got.length >= n || Date.now() > end) return got;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function measure(label: string, command: 'sidecar' | 'run'): Promise<Row[]> {
  const app = await startApp();
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-jobs-'));
  const httpPort = await freePort();
  const grpcPort = await freePort();
  const child = await startChild(
    process.execPath,
    [RT, command, '--app-id', 'bench', '--app-port', String(app.port), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', dir, '--log-level', 'error'],
    { readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz` },
  );
  const base = `http://127.0.0.1:${httpPort}`;
  try {
    // warm-up
    await scheduleMany(base, 500, 16, () => ({ dueTime: '1h', data: 0 }), (i) => `warm-${i}`);

    // 1. schedule calls/s (jobs due in an hour: only the API and the store are measured)
    const sched = await scheduleMany(base, 5000, 32, (i) => ({ dueTime: '1h', data: { i } }), (i) => `s-${i}`);

    // 2. burst: 10,000 jobs due at the same instant
    const due = Date.now() + 15_000;
    const mk = await scheduleMany(base, BURST, 32, () => ({ dueTime: new Date(due).toISOString(), data: due }), (i) => `b-${i}`);
    const slack = due - Date.now();
    const burst = await waitArrivals(app.arrivals, 'b-', BURST, 60_000 + Math.max(0, slack));
    const firstAt = Math.min(...burst.map((a) => a.at));
    const lastAt = Math.max(...burst.map((a) => a.at));
    const triggersPerSec = burst.length / Math.max(0.001, (lastAt - Math.max(firstAt, due)) / 1000);
    const burstLate = burst.map((a) => a.at - a.due).sort((x, y) => x - y);

    // 3. steady: 1,000 triggers/s for 5 s (job i due at start + i ms)
    const start = Date.now() + 12_000;
    const n = STEADY_RATE * STEADY_SECONDS;
    await scheduleMany(base, n, 32, (i) => ({ dueTime: new Date(start + Math.floor((i * 1000) / STEADY_RATE)).toISOString(), data: start + Math.floor((i * 1000) / STEADY_RATE) }), (i) => `t-${i}`);
    const steady = await waitArrivals(app.arrivals, 't-', n, 60_000 + Math.max(0, start - Date.now()));
    const steadyLate = steady.map((a) => a.at - a.due).sort((x, y) => x - y);
    const rss = child.proc.pid ? rssMb(child.proc.pid) : Number.NaN;

    if (slack < 0) console.warn(`note (${label}): scheduling the burst took longer than its lead time; lateness includes the wait`);
    if (mk.errors || sched.errors) console.warn(`note (${label}): ${mk.errors + sched.errors} schedule calls failed`);
    return [
      { setup: label, measure: 'schedule calls/s (HTTP API)', rt: sched.rps, anchor: ANCHOR_SCHEDULES, ratio: ratio(sched.rps, ANCHOR_SCHEDULES), target: '≥ 1,000', note: `p50 ${sched.p50.toFixed(1)} ms, p99 ${sched.p99.toFixed(1)} ms at 32 in flight` },
      { setup: label, measure: `triggers/s delivered (${BURST} due at once)`, rt: triggersPerSec, anchor: ANCHOR_TRIGGERS, ratio: ratio(triggersPerSec, ANCHOR_TRIGGERS), target: '≥ 20,000', note: `${burst.length}/${BURST} delivered` },
      { setup: label, measure: `lateness p50 / p99, ${BURST} due at once (ms)`, rt: `${percentile(burstLate, 50)} / ${percentile(burstLate, 99)}`, anchor: '—', ratio: '—', target: '—', note: '' },
      { setup: label, measure: `lateness p50 / p99 at ${STEADY_RATE}/s (ms)`, rt: `${percentile(steadyLate, 50)} / ${percentile(steadyLate, 99)}`, anchor: '—', ratio: '—', target: 'p99 ≤ 100', note: `${steady.length}/${n} delivered; sidecar RSS ${rss.toFixed(0)} MB` },
    ];
  } finally {
    await child.stop();
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The scheduler alone: `rt scheduler` (SQLite) streaming 10,000 triggers due at once to one
 * gRPC client that acks each at once (no app call): the scheduler's side of the anchor figure.
 */
async function measureStream(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-sched-'));
  const port = await freePort();
  const child = await startChild(process.execPath, [RT, 'scheduler', '--port', String(port), '--data-dir', dir, '--log-level', 'error']);
  await waitForPort('127.0.0.1', port);
  const client = new GrpcSchedulerClient([`127.0.0.1:${port}`], { log: pino({ level: 'silent' }) });
  try {
    const at: number[] = [];
    client.watch({ namespace: 'default', appId: 'stream' }, async () => {
      at.push(Date.now());
      return true;
    });
    const due = Date.now() + 10_000;
    const queue = Array.from({ length: BURST }, (_, i) => i);
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
          await client.schedule({ namespace: 'default', appId: 'stream', owner: '', name: `s-${i}` }, { dueTime: new Date(due).toISOString() }, false);
        }
      }),
    );
    const end = Date.now() + 60_000 + Math.max(0, due - Date.now());
    while (at.length < BURST && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const first = Math.max(due, Math.min(...at));
    const rate = at.length / Math.max(0.001, (Math.max(...at) - first) / 1000);
    const late = at.map((t) => t - due).sort((x, y) => x - y);
    return [
      { setup: 'rt scheduler → gRPC stream (ack only, no app)', measure: `triggers/s streamed (${BURST} due at once)`, rt: rate, anchor: ANCHOR_TRIGGERS, ratio: ratio(rate, ANCHOR_TRIGGERS), target: '≥ 20,000', note: `${at.length}/${BURST} acked; lateness p50 ${percentile(late, 50)} ms, p99 ${percentile(late, 99)} ms` },
    ];
  } finally {
    await client.close();
    await child.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(machineLine());
console.log(`load average at start: ${loadavg().map((l) => l.toFixed(1)).join(' ')} (the machine is shared; figures move with it)`);
const rows = [...(await measure('rt sidecar (in-process scheduler)', 'sidecar')), ...(await measure('rt run (scheduler over loopback gRPC)', 'run')), ...(await measureStream())];
// the same-run anchor of the delivered rate: the scheduler's own stream, measured just above
const streamed = Number(rows[rows.length - 1].rt);
for (const r of rows) if (String(r.measure).startsWith('triggers/s delivered')) r.note = `${r.note}; ${ratio(Number(r.rt), streamed)} of the stream in this run`;
printTable('Jobs: sidecar HTTP API and trigger delivery (anchor: Go runtime scheduler, published cluster figures)', rows);
