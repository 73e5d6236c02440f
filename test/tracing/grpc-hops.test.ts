/**
 * Spans of the hops toward an app that speaks gRPC, as a real Jaeger receives them: a call
 * proxied by rt-app-id (the caller sidecar's CLIENT span, the callee sidecar's SERVER span, the
 * app's metadata carrying the latter), and a publish delivered through OnTopicEvent (PRODUCER →
 * CONSUMER, the app's metadata carrying the CONSUMER span). One sidecar plays both sides of the
 * proxy: it calls its own app id through its internal port, as a call to another app would.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `grpc-hops-${process.pid}-${Date.now().toString(36)}`;
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const raw = (b: Buffer) => b;

/** Polls `get` until it gives a value (deadline, no fixed sleeps of 100 ms or more). */
async function eventually<T>(get: () => T | undefined, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!available)('spans of calls and deliveries to a gRPC app, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  let sidecar: Sidecar | undefined;
  let app: grpc.Server | undefined;
  let client: grpc.Client | undefined;
  const prevHome = process.env.RT_HOME;
  /** The traceparent each proxied call brought to the app, by its body. */
  const proxied = new Map<string, string>();
  /** The traceparent each OnTopicEvent brought, by the event's data. */
  const events = new Map<string, string>();

  beforeAll(async () => {
    jaeger = await startJaeger();
    dir = await mkdtemp(join(tmpdir(), 'rt-grpc-hops-'));
    process.env.RT_HOME = join(dir, 'home');
    await mkdir(join(dir, 'r'));
    await writeFile(join(dir, 'r', 'bus.yaml'), stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'bus' }, spec: { type: 'pubsub.in-memory', version: 'v1' } }));
    await writeFile(
      join(dir, 'config.yaml'),
      stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing: { samplingRate: '1', otel: { endpointAddress: jaeger.otlpGrpcEndpoint, isSecure: false, protocol: 'grpc' } } } }),
    );

    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '../../sidecar/src/app/proto'), PROTO_DIR] });
    app = new grpc.Server();
    app.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, {
      ListTopicSubscriptions: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { subscriptions: [{ pubsub_name: 'bus', topic: 'orders', routes: { rules: [], default: '/orders' } }] }),
      OnTopicEvent: (call: grpc.ServerUnaryCall<{ data: Buffer }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        events.set(call.request.data.toString(), String(call.metadata.get('traceparent')[0] ?? ''));
        cb(null, { status: 0 });
      },
    });
    // any other service: what rt-app-id proxying reaches
    app.addService({ Say: { path: '/rt.test.Echo/Say', requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw } } as grpc.ServiceDefinition, {
      Say: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        proxied.set(call.request.toString(), String(call.metadata.get('traceparent')[0] ?? ''));
        cb(null, call.request);
      },
    });
    const appPort = await new Promise<number>((res, rej) => app!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    sidecar = await startSidecar({
      appId: APP,
      appPort,
      appProtocol: 'grpc',
      httpPort: 0,
      grpcPort: 0,
      enableMetrics: false,
      dataDir: join(dir, 'd'),
      resourcesPaths: [join(dir, 'r')],
      configFile: join(dir, 'config.yaml'),
      logger: pino({ level: 'silent' }),
    });
    client = new grpc.Client(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure());
  }, 120_000);

  afterAll(async () => {
    client?.close();
    await sidecar?.close();
    app?.forceShutdown();
    await jaeger?.stop();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("a proxied call is a CLIENT span on the caller's sidecar and a SERVER span on the callee's, whose context the app gets", async () => {
    const traceId = hex(16);
    const root = hex(8);
    const body = `say-${hex(4)}`;
    const md = new grpc.Metadata();
    md.set('rt-app-id', APP);
    md.set('traceparent', `00-${traceId}-${root}-01`);
    const answer = await new Promise<Buffer>((resolve, reject) => client!.makeUnaryRequest('/rt.test.Echo/Say', raw, raw, Buffer.from(body), md, (err, res) => (err ? reject(err) : resolve(res!))));
    expect(answer.toString()).toBe(body);
    const got = parseTraceParent(proxied.get(body));
    expect(got?.traceId).toBe(traceId);

    const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
    const server = spans.find((s) => s.spanId === got!.spanId);
    expect(server).toMatchObject({ kind: 'server', operationName: 'rt.test.Echo/Say', tags: expect.objectContaining({ 'rt.operation': 'invoke.grpc', 'rt.caller_app_id': APP, 'rpc.grpc.status_code': 0 }) });
    const clientSpan = spans.find((s) => s.spanId === server!.parentSpanId);
    expect(clientSpan).toMatchObject({ kind: 'client', operationName: 'rt.test.Echo/Say', tags: expect.objectContaining({ 'rt.operation': 'invoke.grpc', 'rt.target_app_id': APP, 'rpc.service': 'rt.test.Echo', 'rpc.method': 'Say' }) });
    // its parent is the caller's context or the API port's SERVER span under it
    const chain = spans.find((s) => s.spanId === clientSpan!.parentSpanId);
    expect(clientSpan!.parentSpanId === root || chain?.parentSpanId === root).toBe(true);
  }, 60_000);

  it('a publish delivered through OnTopicEvent: PRODUCER → CONSUMER, the app gets the CONSUMER span', async () => {
    const traceId = hex(16);
    const root = hex(8);
    const data = `ev-${hex(4)}`;
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/publish/bus/orders`, { method: 'POST', headers: { 'content-type': 'text/plain', traceparent: `00-${traceId}-${root}-01` }, body: data });
    expect(res.status).toBe(204);
    const got = parseTraceParent(await eventually(() => events.get(data), 'the OnTopicEvent delivery'));
    expect(got?.traceId).toBe(traceId);

    const spans = await jaeger.waitForTrace(traceId, 3, 20_000);
    const api = spans.find((s) => s.kind === 'server' && s.parentSpanId === root);
    const producer = spans.find((s) => s.kind === 'producer');
    expect(producer).toMatchObject({ parentSpanId: api!.spanId, operationName: 'publish orders', tags: expect.objectContaining({ 'rt.component': 'bus', 'messaging.operation.type': 'publish' }) });
    expect(spans.find((s) => s.spanId === got!.spanId)).toMatchObject({ kind: 'consumer', parentSpanId: producer!.spanId, tags: expect.objectContaining({ 'rt.outcome': 'SUCCESS', 'messaging.destination.name': 'orders' }) });
  }, 60_000);
});
