/**
 * Pub/sub benchmark: messages/s and latency from publish to delivery through Redis Streams.
 *
 * rt: the load generator POSTs /v1.0/publish/<pubsub.redis>/<topic> to an `rt sidecar` (child
 * process) at a fixed concurrency; the sidecar's subscription delivers each CloudEvent to an
 * app (node:http in this process), which answers 200. Anchor: the bare ioredis client doing the
 * same work by hand — XADD from the same number of workers, one consumer looping
 * XREADGROUP (COUNT 100, BLOCK) and XACK. Latency = delivery (or read) time − publish start.
 * Target: rt ≥ 50% of the anchor's messages/s.
 *
 * MQTT (row `mqtt`, no target): the same rt path through pubsub.mqtt3 and a private Mosquitto
 * (QoS 1 both ways), beside bare MQTT.js publishing at QoS 1 from the same number of workers to
 * one QoS 1 subscriber on the same broker.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { mosquittoMissing, startMosquitto, type Mosquitto } from '../test/services/mosquitto.ts';
import { freePort } from '../test/services/net.ts';
import { redisTarget } from '../test/services/redis.ts';
import { machineLine, percentile, procCpuMs, printTable, ratio, startChild, type Row } from './lib.ts';

const RT = fileURLToPath(new URL('../cli/rt.ts', import.meta.url));
const N = Number(process.env.BENCH_MESSAGES ?? 30_000); // long enough that start-up and JIT warm-up weigh little on either side
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);

interface Result {
  msgs: number;
  seconds: number;
  latencies: number[];
  /** CPU milliseconds spent per 1,000 messages, by process: where the cost is. */
  cpu: Record<string, number>;
}

function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

async function redisCpuMs(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const n = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (n('used_cpu_user') + n('used_cpu_sys')) * 1000;
}

/** CPU ms per 1,000 messages between two readings of {process: ms}. */
function perThousand(before: Record<string, number>, after: Record<string, number>, msgs: number): Record<string, number> {
  return Object.fromEntries(Object.keys(after).map((k) => [k, ((after[k] - before[k]) * 1000) / msgs]));
}

function row(name: string, r: Result, anchor?: Result): Row {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  const rate = r.msgs / r.seconds;
  return {
    path: name,
    messages: r.msgs,
    'msgs/s': Math.round(rate),
    'p50 ms': percentile(sorted, 50),
    'p99 ms': percentile(sorted, 99),
    'vs anchor': anchor ? ratio(rate, anchor.msgs / anchor.seconds) : '1.00×',
    'CPU ms / 1k msgs': Object.entries(r.cpu)
      .map(([k, v]) => `${k} ${v.toFixed(0)}`)
      .join(', '),
  };
}

async function workers(count: number, total: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: count }, async () => {
      while (next < total) await fn(next++);
    }),
  );
}

async function bare(target: Awaited<ReturnType<typeof redisTarget>>): Promise<Result> {
  const topic = `rt-bench-bare-${Date.now()}`;
  const pub = new Redis({ host: target.host, port: target.port, enableAutoPipelining: true });
  const sub = new Redis({ host: target.host, port: target.port });
  await pub.xgroup('CREATE', topic, 'bench', '$', 'MKSTREAM');
  const latencies: number[] = [];
  let received = 0;
  const cpu0 = { bench: selfCpuMs(), redis: await redisCpuMs(pub) };
  const start = performance.now();
  const consumer = (async () => {
    while (received < N) {
      const res = (await sub.xreadgroup('GROUP', 'bench', 'c1', 'COUNT', 100, 'BLOCK', 1000, 'STREAMS', topic, '>')) as [string, [string, string[]][]][] | null;
      for (const [, entries] of res ?? []) {
        const ids: string[] = [];
        for (const [id, fields] of entries) {
          latencies.push(performance.now() - Number(fields[1]));
          ids.push(id);
        }
        await sub.xack(topic, 'bench', ...ids);
        received += entries.length;
      }
    }
  })();
  await workers(CONCURRENCY, N, async () => {
    await pub.xadd(topic, '*', 'sent', String(performance.now()));
  });
  await consumer;
  const seconds = (performance.now() - start) / 1000;
  const cpu = perThousand(cpu0, { bench: selfCpuMs(), redis: await redisCpuMs(pub) }, N);
  await pub.del(topic);
  pub.disconnect();
  sub.disconnect();
  return { msgs: N, seconds, latencies, cpu };
}

/** The bare MQTT.js anchor: QoS 1 publishes from CONCURRENCY workers, one QoS 1 subscriber acknowledging each. */
async function bareMqtt(broker: Mosquitto): Promise<Result> {
  const { connectAsync } = await import('mqtt');
  const topic = `rt-bench/bare/${Date.now()}`;
  const sub = await connectAsync(broker.url, { clientId: `bench-sub-${process.pid}`, clean: true });
  const pub = await connectAsync(broker.url, { clientId: `bench-pub-${process.pid}`, clean: true });
  await sub.subscribeAsync(topic, { qos: 1 });
  const latencies: number[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((r) => (done = r));
  sub.on('message', (_t, payload) => {
    latencies.push(performance.now() - Number(payload.toString()));
    if (latencies.length === N) done();
  });
  const cpu0 = { bench: selfCpuMs(), mosquitto: procCpuMs(broker.pid()) };
  const start = performance.now();
  await workers(CONCURRENCY, N, async () => {
    await pub.publishAsync(topic, String(performance.now()), { qos: 1 });
  });
  await all;
  const seconds = (performance.now() - start) / 1000;
  const cpu = perThousand(cpu0, { bench: selfCpuMs(), mosquitto: procCpuMs(broker.pid()) }, N);
  await Promise.all([sub.endAsync(), pub.endAsync()]);
  return { msgs: N, seconds, latencies, cpu };
}

/**
 * 'single': one HTTP publish and one HTTP delivery per message (the headline row).
 * 'bulk': the API's batched forms, as the anchor batches its Redis calls: bulk publish of
 * BULK entries per request, and a bulkSubscribe subscription delivering up to BULK per call.
 * 'relay': the floor of any design with an HTTP call in and out per message — the same load
 * and app, but the child process is a bare node:http server that answers 204 and POSTs the body
 * on to the app with undici (no Redis, no pub/sub code).
 */
type Mode = 'single' | 'bulk' | 'relay';
const BULK = 100;

const RELAY = `
import { createServer } from 'node:http';
import { Pool } from 'undici';
const app = new Pool(process.argv[1], { connections: 64 });
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(204).end();
    if (req.method !== 'POST') return;
    const body = '{"data":' + Buffer.concat(chunks).toString() + '}';
    app.request({ method: 'POST', path: '/msg', body, headers: { 'content-type': 'application/json' } }).then((r) => r.body.dump(), () => undefined);
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.argv[2]), '127.0.0.1');
`;

/** `mqtt`: the 'single' path through pubsub.mqtt3 on this broker instead of pubsub.redis. */
async function throughRt(target: Awaited<ReturnType<typeof redisTarget>>, mode: Mode, mqtt?: Mosquitto): Promise<Result> {
  const topic = `rt-bench-rt-${mode}-${Date.now()}`;
  const component = mqtt
    ? `pubsub.mqtt3\n  version: v1\n  metadata:\n    - name: url\n      value: "${mqtt.url}"\n    - name: cleanSession\n      value: "true"\n`
    : `pubsub.redis\n  version: v1\n  metadata:\n    - name: redisHost\n      value: "${target.redisHost}"\n    - name: concurrency\n      value: "${mode === 'bulk' ? 10 * BULK : 64}"\n`;
  // the broker's CPU beside the sidecar's: Redis', or Mosquitto's
  const backendCpu = async (): Promise<Record<string, number>> => (mqtt ? { mosquitto: procCpuMs(mqtt.pid()) } : mode === 'relay' ? {} : { redis: await redisCpuMs(r) });
  const latencies: number[] = [];
  let received = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((r) => (done = r));
  const app = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/msg') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { data: { sent: number } } | { entries: { entryId: string; event: { data: { sent: number } } }[] };
      const now = performance.now();
      if ('entries' in body) {
        for (const e of body.entries) latencies.push(now - e.event.data.sent);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ statuses: body.entries.map((e) => ({ entryId: e.entryId, status: 'SUCCESS' })) }));
        received += body.entries.length;
      } else {
        latencies.push(now - body.data.sent);
        res.writeHead(200).end();
        received++;
      }
      if (received === N) done();
    });
  });
  app.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const appPort = (app.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), 'rt-bench-pubsub-'));
  writeFileSync(
    join(dir, 'pubsub.yaml'),
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: q\nspec:\n  type: ${component}---\napiVersion: rt.io/v1alpha1\nkind: Subscription\nmetadata:\n  name: s\nspec:\n  pubsubname: q\n  topic: ${topic}\n  route: /msg\n${mode === 'bulk' ? `  bulkSubscribe:\n    enabled: true\n    maxMessagesCount: ${BULK}\n    maxAwaitDurationMs: 5\n` : ''}`,
  );
  const [hp, gp] = [await freePort(), await freePort()];
  // BENCH_CPU_PROF=<dir> writes the sidecar's CPU profile there (node --cpu-prof), to see where its time goes
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  const args =
    mode === 'relay'
      ? ['--input-type=module', '-e', RELAY, `http://127.0.0.1:${appPort}`, String(hp)]
      : [...prof, RT, 'sidecar', '--app-id', 'bench-pubsub', '--app-port', String(appPort), '--http-port', String(hp), '--grpc-port', String(gp), '--disable-metrics', '--resources-path', dir, '--data-dir', join(dir, 'data'), '--log-level', 'warn'];
  const sidecar = await startChild(process.execPath, args, { readyUrl: `http://127.0.0.1:${hp}/v1.0/healthz` });
  const child = mode === 'relay' ? 'relay' : 'sidecar';
  const pool = new Pool(`http://127.0.0.1:${hp}`, { connections: CONCURRENCY });
  const r = new Redis({ host: target.host, port: target.port });
  const pid = sidecar.proc.pid ?? 0;
  try {
    if (mode !== 'relay') await new Promise((r) => setTimeout(r, 1500)); // the subscription opens once the app is reachable
    const cpu0 = { bench: selfCpuMs(), [child]: procCpuMs(pid), ...(await backendCpu()) };
    const start = performance.now();
    if (mode !== 'bulk') {
      await workers(CONCURRENCY, N, async () => {
        const res = await pool.request({ method: 'POST', path: `/v1.0/publish/q/${topic}`, body: JSON.stringify({ sent: performance.now() }), headers: { 'content-type': 'application/json' } });
        await res.body.dump();
        if (res.statusCode !== 204) throw new Error(`publish answered ${res.statusCode}`);
      });
    } else {
      await workers(CONCURRENCY, N / BULK, async (b) => {
        const sent = performance.now();
        const entries = Array.from({ length: BULK }, (_, i) => ({ entryId: String(b * BULK + i), event: { sent }, contentType: 'application/json' }));
        const res = await pool.request({ method: 'POST', path: `/v1.0-alpha1/publish/bulk/q/${topic}`, body: JSON.stringify(entries), headers: { 'content-type': 'application/json' } });
        await res.body.dump();
        if (res.statusCode !== 204) throw new Error(`bulk publish answered ${res.statusCode}`);
      });
    }
    const published = performance.now();
    await all;
    const seconds = (performance.now() - start) / 1000;
    const cpu = perThousand(cpu0, { bench: selfCpuMs(), [child]: procCpuMs(pid), ...(await backendCpu()) }, N);
    console.log(`rt (${mode}): publishing took ${((published - start) / 1000).toFixed(2)} s, the last delivery ${((performance.now() - published) / 1000).toFixed(2)} s after`);
    return { msgs: N, seconds, latencies, cpu };
  } finally {
    await pool.close();
    await sidecar.stop();
    app.closeAllConnections();
    await new Promise((r) => app.close(r));
    if (!mqtt) await r.del(topic);
    r.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  console.log(machineLine());
  console.log(`load average before the run: ${loadavg().map((l) => l.toFixed(1)).join(', ')} (other work on this machine skews the figures)`);
  const target = await redisTarget();
  if (!target.available) throw new Error(`Redis is not reachable at ${target.url}; npm run bench starts one (or set RT_TEST_REDIS_URL)`);
  // BENCH_PUBSUB_ROWS=bulk (comma-separated single,bulk,relay,mqtt) runs only those rows beside the anchor:
  // a CPU profile (BENCH_CPU_PROF) of one path, or repeated runs of the batched row
  const rows = new Set((process.env.BENCH_PUBSUB_ROWS ?? 'single,bulk,relay,mqtt').split(','));
  const anchor = await bare(target);
  const out = [row('anchor: bare ioredis XADD / XREADGROUP / XACK', anchor)];
  if (rows.has('single')) out.push(row('rt: HTTP publish → sidecar → pubsub.redis → sidecar → app (HTTP), one message per call', await throughRt(target, 'single'), anchor));
  if (rows.has('bulk')) out.push(row(`rt, batched API: bulk publish (${BULK} per call) → … → bulkSubscribe (≤ ${BULK} per call)`, await throughRt(target, 'bulk'), anchor));
  if (rows.has('relay')) out.push(row('floor, not rt: the same HTTP in and out per message through a bare node:http + undici relay (no Redis)', await throughRt(target, 'relay'), anchor));
  printTable(`publish → delivery through Redis Streams, ${N} messages, ${CONCURRENCY} publishers (target: rt ≥ 0.50× of bare)`, out);
  if (rows.has('mqtt')) await mqttRows(target);
}

/** The MQTT table: rt through pubsub.mqtt3 beside bare MQTT.js, on a private Mosquitto (no target). */
async function mqttRows(target: Awaited<ReturnType<typeof redisTarget>>): Promise<void> {
  const missing = mosquittoMissing();
  if (missing) return void console.log(`MQTT rows skipped: ${missing}`);
  const broker = await startMosquitto();
  try {
    const anchor = await bareMqtt(broker);
    const rt = await throughRt(target, 'single', broker);
    printTable(`publish → delivery through Mosquitto at QoS 1, ${N} messages, ${CONCURRENCY} publishers (no target)`, [
      row('anchor: bare MQTT.js, QoS 1 publish → QoS 1 subscriber', anchor),
      row('rt: HTTP publish → sidecar → pubsub.mqtt3 → sidecar → app (HTTP), one message per call', rt, anchor),
    ]);
  } finally {
    await broker.close();
  }
}

await main();
