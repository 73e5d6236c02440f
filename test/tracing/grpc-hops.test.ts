/**
 * Spans of the hops toward an app that speaks gRPC, as a real Jaeger receives them: a call
 * proxied by rt-app-id (the caller sidecar's CLIENT span, the callee sidecar's SERVER span, the
 * app's metadata carrying the latter), and a publish delivered through OnTopicEvent (PRODUCER →
 * CONSUMER, the app's metadata carrying the CONSUMER span). One sidecar plays both sides of the
 * proxy: it calls its own app id through its internal port, as a call to another app would.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { eventually, startCallbackApp, startTracedSidecar, tracingFolder } from './harness.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `grpc-hops-${process.pid}-${Date.now().toString(36)}`;
const raw = (b: Buffer) => b;

describe.skipIf(!available)('spans of calls and deliveries to a gRPC app, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  let remove: (() => Promise<void>) | undefined;
  let sidecar: Sidecar | undefined;
  let app: grpc.Server | undefined;
  let client: grpc.Client | undefined;
  /** The traceparent each proxied call brought to the app, by its body. */
  const proxied = new Map<string, string>();
  /** The traceparent each OnTopicEvent brought, by the event's data. */
  const events = new Map<string, string>();

  beforeAll(async () => {
    jaeger = await startJaeger();
    ({ dir, remove } = await tracingFolder('rt-grpc-hops-', jaeger, [{ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'bus' }, spec: { type: 'pubsub.in-memory', version: 'v1' } }]));
    let appPort: number;
    ({ server: app, port: appPort } = await startCallbackApp(
      {
        ListTopicSubscriptions: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { subscriptions: [{ pubsub_name: 'bus', topic: 'orders', routes: { rules: [], default: '/orders' } }] }),
        OnTopicEvent: (call: grpc.ServerUnaryCall<{ data: Buffer }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          events.set(call.request.data.toString(), String(call.metadata.get('traceparent')[0] ?? ''));
          cb(null, { status: 0 });
        },
      },
      // any other service: what rt-app-id proxying reaches
      (server) =>
        server.addService({ Say: { path: '/rt.test.Echo/Say', requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw } } as grpc.ServiceDefinition, {
          Say: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
            proxied.set(call.request.toString(), String(call.metadata.get('traceparent')[0] ?? ''));
            cb(null, call.request);
          },
        }),
    ));
    sidecar = await startTracedSidecar(dir, APP, { port: appPort, protocol: 'grpc' });
    client = new grpc.Client(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure());
  }, 120_000);

  afterAll(async () => {
    client?.close();
    await sidecar?.close();
    app?.forceShutdown();
    await jaeger?.stop();
    await remove?.();
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
