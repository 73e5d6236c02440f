/**
 * One trace across two sidecars, their apps and pub/sub, as Jaeger (a real one) receives it:
 * the test → sidecar A (HTTP API, SERVER span; the call out, CLIENT span) → sidecar B's internal
 * port (SERVER span; the call to the app, CLIENT span) → app B, which publishes through sidecar B
 * (SERVER span; PRODUCER span, the event's traceparent) → Redis → sidecar A's delivery (CONSUMER
 * span) → app A. Sidecar A exports over OTLP/gRPC, sidecar B over OTLP/HTTP,
 * so one trace proves both protocols. A third sidecar with samplingRate "0" exports nothing; a
 * call without traceparent and one with a bad traceparent start new traces and answer normally;
 * a job trigger starts a trace of its own and the app gets its context.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { startRedis } from '../services/redis.ts';
import type { StartedServer } from '../services/server-process.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const RUN = `${process.pid}-${Date.now().toString(36)}`;
const A = `trace-a-${RUN}`;
const B = `trace-b-${RUN}`;
const OFF = `trace-off-${RUN}`;


function listen(handler: (path: string, headers: IncomingHttpHeaders, body: string) => Promise<{ status: number; body: string }>): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handler(req.url ?? '', req.headers, Buffer.concat(chunks).toString()).then(
        (a) => res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body),
        (e: unknown) => res.writeHead(500).end(String(e)),
      );
    });
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ server, port: (server.address() as { port: number }).port })));
}

describe.skipIf(!available)('trace context across sidecars, apps and pub/sub, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let redis: StartedServer;
  let dir: string;
  const sidecars: Sidecar[] = [];
  const servers: Server[] = [];
  const prevHome = process.env.RT_HOME;
  let a: Sidecar;
  let b: Sidecar;
  let off: Sidecar;
  /** What app A's subscription got, by the event's data.id. */
  const delivered = new Map<string, IncomingHttpHeaders>();
  const waiters = new Map<string, (h: IncomingHttpHeaders) => void>();
  /** What app A's job endpoint got, by job name. */
  const jobs = new Map<string, IncomingHttpHeaders>();
  /** What app B's /work got. */
  const workHeaders: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    [jaeger, redis] = await Promise.all([startJaeger(), startRedis()]);
    dir = await mkdtemp(join(tmpdir(), 'rt-trace-flow-'));
    process.env.RT_HOME = join(dir, 'home');
    const appA = await listen(async (path, headers, body) => {
      if (path.startsWith('/job/')) jobs.set(decodeURIComponent(path.slice(5)), headers);
      if (path === '/orders') {
        const id = String((JSON.parse(body) as { data: { id: string } }).data.id);
        delivered.set(id, headers);
        waiters.get(id)?.(headers);
      }
      return { status: 200, body: '{}' };
    });
    let bHttpPort = 0;
    const appB = await listen(async (path, headers, body) => {
      if (!path.startsWith('/work')) return { status: 200, body: '{}' };
      workHeaders.push(headers);
      // the app passes on the context it was given, as an instrumented app does
      const res = await fetch(`http://127.0.0.1:${bHttpPort}/v1.0/publish/bus/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(headers.traceparent ? { traceparent: String(headers.traceparent) } : {}) },
        body: JSON.stringify({ id: body || 'none' }),
      });
      return { status: res.status === 204 ? 200 : 502, body: JSON.stringify({ traceparent: headers.traceparent ?? null }) };
    });
    servers.push(appA.server, appB.server);
    const bus = { apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'bus' }, spec: { type: 'pubsub.redis', version: 'v1', metadata: [{ name: 'redisHost', value: `127.0.0.1:${redis.port}` }] } };
    const sub = { apiVersion: 'dapr.io/v2alpha1', kind: 'Subscription', metadata: { name: 'orders' }, spec: { pubsubname: 'bus', topic: 'orders', routes: { default: '/orders' } }, scopes: [A] };
    const config = (samplingRate: string, otel: Record<string, unknown>) => stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing: { samplingRate, otel } } });
    for (const [name, docs] of Object.entries({ a: [bus, sub], b: [bus], off: [] as unknown[] })) {
      await mkdir(join(dir, name));
      for (const [i, d] of docs.entries()) await writeFile(join(dir, name, `${i}.yaml`), stringify(d));
    }
    await writeFile(join(dir, 'a.config.yaml'), config('1', { endpointAddress: jaeger.otlpGrpcEndpoint, isSecure: false, protocol: 'grpc' }));
    await writeFile(join(dir, 'b.config.yaml'), config('1', { endpointAddress: jaeger.otlpHttpEndpoint.replace('http://', ''), isSecure: false, protocol: 'http' }));
    await writeFile(join(dir, 'off.config.yaml'), config('0', { endpointAddress: jaeger.otlpGrpcEndpoint, protocol: 'grpc' }));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, logger: pino({ level: 'silent' }) };
    b = await startSidecar({ ...common, dataDir: join(dir, 'b-data'), appId: B, appPort: appB.port, resourcesPaths: [join(dir, 'b')], configFile: join(dir, 'b.config.yaml') });
    sidecars.push(b);
    bHttpPort = b.httpPort;
    a = await startSidecar({ ...common, dataDir: join(dir, 'a-data'), appId: A, appPort: appA.port, resourcesPaths: [join(dir, 'a')], configFile: join(dir, 'a.config.yaml') });
    sidecars.push(a);
    off = await startSidecar({ ...common, dataDir: join(dir, 'off-data'), appId: OFF, appPort: appB.port, resourcesPaths: [join(dir, 'off')], configFile: join(dir, 'off.config.yaml') });
    sidecars.push(off);
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled(sidecars.map((s) => s.close()));
    for (const s of servers) s.close();
    await Promise.allSettled([jaeger?.stop(), redis?.stop()]);
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const deliveredOf = (id: string) =>
    new Promise<IncomingHttpHeaders>((resolve, reject) => {
      const got = delivered.get(id);
      if (got) return resolve(got);
      const t = setTimeout(() => reject(new Error(`event ${id} was not delivered to app A in 15 s`)), 15_000);
      waiters.set(id, (h) => {
        clearTimeout(t);
        resolve(h);
      });
    });

  const invokeB = (from: Sidecar, id: string, headers: Record<string, string>) => fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/${B}/method/work`, { method: 'POST', headers: { 'content-type': 'text/plain', ...headers }, body: id });

  it('app A → sidecar A → sidecar B → app B → publish → sidecar A → app A is one trace with the right parents, over both OTLP protocols', async () => {
    const traceId = hex(16);
    const rootSpan = hex(8);
    const id = `e-${hex(4)}`;
    const res = await invokeB(a, id, { traceparent: `00-${traceId}-${rootSpan}-01`, tracestate: 'rt=1' });
    expect(res.status).toBe(200);
    const toApp = parseTraceParent(((await res.json()) as { traceparent: string }).traceparent);
    const atSubscriber = parseTraceParent((await deliveredOf(id)).traceparent);
    expect(toApp?.traceId).toBe(traceId);
    expect(atSubscriber?.traceId).toBe(traceId);

    // a span per hop: A's API (SERVER) → A's call (CLIENT) → B's internal port (SERVER) → B's call
    // to app B (CLIENT) → app B's publish through B (SERVER) → B's PRODUCER → A's CONSUMER
    const spans = await jaeger.waitForTrace(traceId, 7, 20_000);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    // sidecar A's API span: its parent is the caller's span (not exported: it is the test's)
    const apiA = spans.find((s) => s.serviceName === A && s.kind === 'server');
    expect(apiA).toMatchObject({ parentSpanId: rootSpan, tags: expect.objectContaining({ 'http.request.method': 'POST', 'rt.app_id': A, 'http.response.status_code': 200 }) });
    const clientA = spans.find((s) => s.serviceName === A && s.kind === 'client');
    expect(clientA).toMatchObject({ parentSpanId: apiA!.spanId, operationName: `POST app ${B}`, tags: expect.objectContaining({ 'rt.operation': 'invoke', 'rt.target_app_id': B, 'http.response.status_code': 200 }) });
    const serverB = spans.find((s) => s.serviceName === B && s.kind === 'server' && s.parentSpanId === clientA!.spanId);
    expect(serverB?.tags).toMatchObject({ 'rt.operation': 'invoke', 'rt.caller_app_id': A });
    // sidecar B's call to app B: app B got its context
    const toAppB = byId.get(toApp!.spanId);
    expect(toAppB).toMatchObject({ serviceName: B, kind: 'client', parentSpanId: serverB!.spanId, tags: expect.objectContaining({ 'rt.target_app_id': B }) });
    // app B's publish through sidecar B: child of the span app B was given, then the PRODUCER span
    const publish = spans.find((s) => s.serviceName === B && s.parentSpanId === toAppB!.spanId);
    expect(publish?.tags).toMatchObject({ 'http.route': '/v1.0/publish/:pubsub/*', 'http.request.method': 'POST' });
    const producer = spans.find((s) => s.parentSpanId === publish!.spanId);
    expect(producer).toMatchObject({ serviceName: B, kind: 'producer', operationName: 'publish orders', tags: expect.objectContaining({ 'messaging.operation.type': 'publish', 'messaging.destination.name': 'orders', 'rt.component': 'bus' }) });
    // delivery on sidecar A: a CONSUMER child of the PRODUCER span, whose context app A got
    const consumer = byId.get(atSubscriber!.spanId);
    expect(consumer).toMatchObject({ serviceName: A, kind: 'consumer', parentSpanId: producer!.spanId, tags: expect.objectContaining({ 'messaging.destination.name': 'orders', 'messaging.operation.type': 'process', 'rt.component': 'bus' }) });
  }, 60_000);

  it('a call without traceparent, and one with a bad traceparent, start new traces and answer normally', async () => {
    const cases: Record<string, string>[] = [{}, { traceparent: '00-zz-not-a-context-01' }, { traceparent: `00-${'0'.repeat(32)}-${hex(8)}-01` }];
    for (const headers of cases) {
      const id = `e-${hex(4)}`;
      const res = await invokeB(a, id, headers);
      expect(res.status).toBe(200);
      const toApp = parseTraceParent(((await res.json()) as { traceparent: string }).traceparent);
      expect(toApp).toBeDefined();
      await deliveredOf(id);
      const spans = await jaeger.waitForTrace(toApp!.traceId, 4, 20_000);
      const root = spans.find((s) => s.serviceName === A && s.kind === 'server');
      expect(root?.parentSpanId).toBeUndefined();
    }
  }, 90_000);

  it("a job trigger is a new trace whose span's context the app gets", async () => {
    const name = `traced-${hex(4)}`;
    const res = await fetch(`http://127.0.0.1:${a.httpPort}/v1.0-alpha1/jobs/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ schedule: '@every 100ms', repeats: 1, data: 'x' }) });
    expect(res.status).toBe(204);
    const deadline = Date.now() + 15_000;
    while (!jobs.has(name) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const tp = parseTraceParent(jobs.get(name)?.traceparent);
    expect(tp).toBeDefined();
    const spans = await jaeger.waitForTrace(tp!.traceId, 1, 20_000);
    expect(spans.find((s) => s.spanId === tp!.spanId)).toMatchObject({ serviceName: A, operationName: `job ${name}`, kind: 'client', tags: expect.objectContaining({ 'rt.operation': 'jobs.trigger', 'rt.job': name, 'http.response.status_code': 200 }) });
    expect(spans.find((s) => s.spanId === tp!.spanId)?.parentSpanId).toBeUndefined();
  }, 30_000);

  it('samplingRate "0" exports nothing, and the caller\'s context still reaches the app unchanged', async () => {
    const traceparent = `00-${hex(16)}-${hex(8)}-01`;
    const res = await fetch(`http://127.0.0.1:${off.httpPort}/v1.0/invoke/${OFF}/method/work`, { method: 'POST', headers: { traceparent }, body: `off-${hex(4)}` });
    // app B publishes through sidecar B (the bus is not OFF's), so its answer may be 502; what it was given is the point
    expect(((await res.json()) as { traceparent: string }).traceparent).toBe(traceparent);
    // once a span sidecar A starts after that call is in Jaeger (A's exporter batches, as OFF's
    // would), a span of OFF's would be there too: it has none, having no exporter
    const marker = hex(16);
    await fetch(`http://127.0.0.1:${a.httpPort}/v1.0/metadata`, { headers: { traceparent: `00-${marker}-${hex(8)}-01` } });
    await jaeger.waitForTrace(marker, 1, 20_000);
    expect(await jaeger.findTraces(OFF)).toEqual([]);
  }, 30_000);
});
