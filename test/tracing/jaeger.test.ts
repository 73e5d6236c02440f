/**
 * The suites' trace backend (test/services/jaeger.ts) proven with a real OTLP client: the
 * OpenTelemetry SDK sends a parent and a child span over OTLP/gRPC and over OTLP/HTTP (protobuf),
 * and the query API gives back both, linked, with their kind, tags and service.
 */
import { randomBytes } from 'node:crypto';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider, type IdGenerator, type SpanExporter } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');

/** Sends a server span with a client child in one trace as `service`; returns their ids. */
async function sendParentAndChild(exporter: SpanExporter, service: string, idGenerator?: IdGenerator) {
  const provider = new TracerProvider({
    idGenerator,
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  try {
    const tracer = provider.getTracer('rt-jaeger-test');
    const parent = tracer.startSpan('GET /orders', { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'rt.count': 3 } });
    const child = tracer.startSpan('redis GET', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'redis', 'rt.cached': true } }, trace.setSpan(context.active(), parent));
    child.end();
    parent.end();
    await provider.forceFlush();
    return { traceId: parent.spanContext().traceId, parentId: parent.spanContext().spanId, childId: child.spanContext().spanId };
  } finally {
    await provider.shutdown();
  }
}

describe.skipIf(!available)('Jaeger, the suites trace backend', () => {
  let jaeger: Jaeger;
  beforeAll(async () => {
    jaeger = await startJaeger();
  });
  afterAll(async () => {
    await jaeger?.stop();
  });

  it('listens on loopback only', () => {
    expect(jaeger.otlpGrpcEndpoint).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(jaeger.otlpHttpEndpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(jaeger.queryUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  const protocols: Array<[string, () => SpanExporter]> = [
    ['OTLP/gRPC', () => new GrpcExporter({ url: `http://${jaeger.otlpGrpcEndpoint}` })],
    ['OTLP/HTTP protobuf', () => new ProtoExporter({ url: `${jaeger.otlpHttpEndpoint}/v1/traces` })],
  ];
  for (const [protocol, exporter] of protocols) {
    it(`keeps a parent and its child sent over ${protocol}, linked, with kind and tags`, async () => {
      const service = `rt-jaeger-test-${protocol.replace(/\W+/g, '-').toLowerCase()}-${process.pid}`;
      const sent = await sendParentAndChild(exporter(), service);
      const spans = await jaeger.waitForTrace(sent.traceId, 2);
      expect(spans).toHaveLength(2);
      const parent = spans.find((s) => s.spanId === sent.parentId);
      const child = spans.find((s) => s.spanId === sent.childId);
      expect(parent).toMatchObject({ traceId: sent.traceId, operationName: 'GET /orders', serviceName: service, kind: 'server' });
      expect(parent?.parentSpanId).toBeUndefined();
      expect(parent?.tags).toMatchObject({ 'http.request.method': 'GET', 'rt.count': 3, 'span.kind': 'server' });
      expect(child).toMatchObject({ traceId: sent.traceId, parentSpanId: sent.parentId, operationName: 'redis GET', serviceName: service, kind: 'client' });
      expect(child?.tags).toMatchObject({ 'db.system': 'redis', 'rt.cached': true });
      expect(await jaeger.findTraces(service)).toEqual([sent.traceId]);
    });
  }

  it('gives ids with leading zeros back at full width (Jaeger drops the zeros, OTel keeps them)', async () => {
    const low = () => randomBytes(4).toString('hex');
    // a 64-bit trace id in a 128-bit field, as Zipkin-era clients send: Jaeger prints it as 16 hex
    const ids: IdGenerator = { generateTraceId: () => `${'0'.repeat(16)}0${low()}${low().slice(1)}`, generateSpanId: () => `00000000${low()}` };
    const service = `rt-jaeger-test-zeros-${process.pid}`;
    const sent = await sendParentAndChild(new ProtoExporter({ url: `${jaeger.otlpHttpEndpoint}/v1/traces` }), service, ids);
    expect(sent.traceId).toMatch(/^0{17}[0-9a-f]{15}$/);
    const spans = await jaeger.waitForTrace(sent.traceId, 2);
    expect(spans.map((s) => s.traceId)).toEqual([sent.traceId, sent.traceId]);
    expect(spans.map((s) => s.spanId).sort()).toEqual([sent.parentId, sent.childId].sort());
    expect(spans.find((s) => s.spanId === sent.childId)?.parentSpanId).toBe(sent.parentId);
    expect(await jaeger.findTraces(service)).toEqual([sent.traceId]);
  });

  it('answers [] for a trace it never got, and for a service it never saw', async () => {
    expect(await jaeger.getTrace(randomBytes(16).toString('hex'))).toEqual([]);
    expect(await jaeger.findTraces(`never-seen-${process.pid}`)).toEqual([]);
  });

  it('gives up waiting for a trace that does not come, saying what it saw', async () => {
    await expect(jaeger.waitForTrace(randomBytes(16).toString('hex'), 1, 300)).rejects.toThrow(/0 span\(s\).*wanted 1: none/);
  });
});
