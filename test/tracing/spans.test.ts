/**
 * Sampling and the spans' attributes, with the SDK's in-memory exporter: parent-based sampling
 * with the trace-id ratio, and the RPC attributes and error status of a gRPC call served by a real
 * grpc-js server through the tracing interceptor.
 */
import * as grpc from '@grpc/grpc-js';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatTraceParent, isSampled, parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { grpcTracingInterceptor, rpcAttributes } from '../../sidecar/src/tracing/grpc.ts';
import { loadSdk } from '../../sidecar/src/tracing/sdk.ts';
import { TracingService } from '../../sidecar/src/tracing/service.ts';

const log = pino({ level: 'silent' });

async function tracingWith(samplingRate: number) {
  const exporter = new InMemorySpanExporter();
  const config = { samplingRate, stdout: false };
  return { exporter, tracing: new TracingService(config, await loadSdk(config, 'app-x', log, { exporter, simple: true }), 'app-x') };
}

const parent = (flags: number) => formatTraceParent({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', flags });

describe('sampling: parent-based, trace-id ratio at the root', () => {
  it("follows a caller's decision either way, whatever the rate", async () => {
    const low = await tracingWith(0.000001);
    const sampled = low.tracing.start('s', 'server', { traceparent: parent(1), tracestate: 'k=v' }, {});
    sampled.end();
    expect(isSampled(sampled.context)).toBe(true);
    expect(sampled.context.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(sampled.traceState).toBe('k=v');
    expect(low.exporter.getFinishedSpans()).toHaveLength(1);
    expect(low.exporter.getFinishedSpans()[0].parentSpanContext?.spanId).toBe('b7ad6b7169203331');

    const all = await tracingWith(1);
    const notSampled = all.tracing.start('s', 'server', { traceparent: parent(0) }, {});
    notSampled.end();
    // not recorded, but the context still goes on (same trace, flags 00)
    expect(all.exporter.getFinishedSpans()).toHaveLength(0);
    expect(notSampled.context.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(isSampled(notSampled.context)).toBe(false);
  });

  it('samples about samplingRate of new traces, and all at 1', async () => {
    const half = await tracingWith(0.5);
    for (let i = 0; i < 2000; i++) half.tracing.start('s', 'server', undefined, {}).end();
    const n = half.exporter.getFinishedSpans().length;
    expect(n).toBeGreaterThan(800);
    expect(n).toBeLessThan(1200);
    const all = await tracingWith(1);
    for (let i = 0; i < 50; i++) all.tracing.start('s', 'server', { traceparent: 'garbage' }, {}).end();
    const spans = all.exporter.getFinishedSpans();
    expect(spans).toHaveLength(50);
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(50);
    expect(spans.every((s) => s.parentSpanContext === undefined && s.attributes['rt.app_id'] === 'app-x')).toBe(true);
  });
});

describe('a gRPC API call through the interceptor (a real grpc-js server)', () => {
  let server: grpc.Server;
  let client: grpc.Client;
  let exporter: InMemorySpanExporter;
  const seen: (string | undefined)[] = [];

  beforeAll(async () => {
    const t = await tracingWith(1);
    exporter = t.exporter;
    server = new grpc.Server({ interceptors: [grpcTracingInterceptor(t.tracing)] });
    const raw = (b: Buffer) => b;
    const method = (path: string) => ({ path, requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw });
    server.addService({ Ok: method('/rt.test.Echo/Ok'), Fail: method('/rt.test.Echo/Fail') } as grpc.ServiceDefinition, {
      Ok: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        seen.push(call.metadata.get('traceparent')[0] as string | undefined);
        cb(null, Buffer.from('ok'));
      },
      Fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' }),
    });
    const port = await new Promise<number>((r, j) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? j(e) : r(p))));
    client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });
  afterAll(() => {
    client?.close();
    server?.forceShutdown();
  });

  const call = (path: string, md: grpc.Metadata) =>
    new Promise<grpc.ServiceError | null>((resolve) => client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), md, (err) => resolve(err)));

  it('makes a SERVER span under the metadata traceparent, with RPC attributes, and hands the handler its own context', async () => {
    const md = new grpc.Metadata();
    md.set('traceparent', parent(1));
    expect(await call('/rt.test.Echo/Ok', md)).toBeNull();
    const span = exporter.getFinishedSpans().at(-1)!;
    expect(span.name).toBe('rt.test.Echo/Ok');
    expect(span.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(span.attributes).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': 'rt.test.Echo', 'rpc.method': 'Ok', 'rpc.grpc.status_code': 0, 'rt.app_id': 'app-x', 'rt.operation': 'Ok' });
    expect(span.status.code).not.toBe(2);
    expect(parseTraceParent(seen.at(-1))).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: span.spanContext().spanId });
  });

  it('marks a gRPC error as the span status', async () => {
    expect((await call('/rt.test.Echo/Fail', new grpc.Metadata()))?.code).toBe(grpc.status.NOT_FOUND);
    const span = exporter.getFinishedSpans().at(-1)!;
    expect(span.attributes['rpc.grpc.status_code']).toBe(grpc.status.NOT_FOUND);
    expect(span.status).toMatchObject({ code: 2, message: 'NOT_FOUND: no such thing' });
    expect(span.parentSpanContext).toBeUndefined();
  });

  it('splits a method path into service and method', () => {
    expect(rpcAttributes('/dapr.proto.runtime.v1.Dapr/GetState')).toEqual({ 'rpc.system': 'grpc', 'rpc.service': 'dapr.proto.runtime.v1.Dapr', 'rpc.method': 'GetState' });
  });
});
