/**
 * spec.tracing.zipkin.endpointAddress against a real Jaeger's Zipkin receiver (test/services/jaeger:
 * a `zipkin` receiver beside OTLP in its collector config): the sidecar's SERVER span arrives with
 * its parent, kind, tags and service, alone or beside an OTLP exporter. The Zipkin exporter is
 * loaded only when a Configuration names it (checked in a fresh Node process that records the
 * modules it resolves).
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const configuration = (tracing: unknown) => stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing } });

describe.skipIf(!available)('Zipkin export to a real Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  const sidecars: Sidecar[] = [];
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    jaeger = await startJaeger();
    dir = await mkdtemp(join(tmpdir(), 'rt-trace-zipkin-'));
    process.env.RT_HOME = join(dir, 'home');
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(sidecars.map((s) => s.close()));
    await jaeger?.stop();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function sidecarWith(appId: string, tracing: unknown): Promise<Sidecar> {
    const file = join(dir, `${appId}.yaml`);
    await writeFile(file, configuration(tracing));
    const s = await startSidecar({ appId, httpPort: 0, grpcPort: 0, enableMetrics: false, configFile: file, dataDir: join(dir, `${appId}-data`), logger: pino({ level: 'silent' }) });
    sidecars.push(s);
    return s;
  }

  /** A state call under a caller's sampled context; closing the sidecar exports what it holds. */
  async function tracedCall(s: Sidecar): Promise<{ traceId: string; parent: string }> {
    const traceId = hex(16);
    const parent = hex(8);
    const res = await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/metadata`, { headers: { traceparent: `00-${traceId}-${parent}-01` } });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await s.close();
    return { traceId, parent };
  }

  it('the span arrives over Zipkin with its parent, kind, tags and service', async () => {
    const appId = `zipkin-${hex(3)}`;
    const s = await sidecarWith(appId, { samplingRate: '1', zipkin: { endpointAddress: jaeger.zipkinEndpoint } });
    const { traceId, parent } = await tracedCall(s);
    const spans = await jaeger.waitForTrace(traceId, 1, 15_000);
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({
      serviceName: appId,
      kind: 'server',
      parentSpanId: parent,
      operationName: 'GET /v1.0/metadata',
      tags: expect.objectContaining({ 'http.request.method': 'GET', 'http.route': '/v1.0/metadata', 'rt.app_id': appId }),
    });
  }, 60_000);

  it('beside OTLP, each exporter sends the span (Jaeger gets it over both receivers)', async () => {
    const appId = `zipkin-otlp-${hex(3)}`;
    const s = await sidecarWith(appId, { samplingRate: '1', otel: { endpointAddress: jaeger.otlpGrpcEndpoint, isSecure: false, protocol: 'grpc' }, zipkin: { endpointAddress: jaeger.zipkinEndpoint } });
    const { traceId } = await tracedCall(s);
    const spans = await jaeger.waitForTrace(traceId, 2, 15_000);
    // the same span, once per receiver
    expect(new Set(spans.map((sp) => sp.spanId)).size).toBe(1);
    expect(spans.every((sp) => sp.serviceName === appId)).toBe(true);
  }, 60_000);

  it('samplingRate "0" exports nothing to Zipkin', async () => {
    const appId = `zipkin-off-${hex(3)}`;
    const s = await sidecarWith(appId, { samplingRate: '0', zipkin: { endpointAddress: jaeger.zipkinEndpoint } });
    await tracedCall(s);
    // closed: anything it had would have been sent by now
    expect(await jaeger.findTraces(appId)).toEqual([]);
  }, 60_000);
});

describe('the Zipkin exporter is loaded only when configured', () => {
  /** The @opentelemetry exporter modules a fresh Node process resolves starting a sidecar with this spec.tracing. */
  function exportersLoaded(tracing: unknown): string[] {
    const root = resolve(import.meta.dirname, '../..');
    const dirPath = join(tmpdir(), `rt-zipkin-lazy-${process.pid}-${hex(3)}`);
    const script = `
      import { registerHooks } from 'node:module';
      import { mkdirSync, writeFileSync } from 'node:fs';
      const seen = new Set();
      registerHooks({ resolve(spec, ctx, next) { if (spec.startsWith('@opentelemetry/exporter-')) seen.add(spec); return next(spec, ctx); } });
      mkdirSync(${JSON.stringify(dirPath)}, { recursive: true });
      writeFileSync(${JSON.stringify(join(dirPath, 'c.yaml'))}, ${JSON.stringify(configuration(tracing))});
      const { startSidecar } = await import(${JSON.stringify(join(root, 'sidecar/src/sidecar.ts'))});
      const pino = (await import('pino')).default;
      const s = await startSidecar({ appId: 'lazy-zipkin', httpPort: 0, grpcPort: 0, enableMetrics: false, configFile: ${JSON.stringify(join(dirPath, 'c.yaml'))}, dataDir: ${JSON.stringify(join(dirPath, 'data'))}, logger: pino({ level: 'silent' }) });
      await s.close();
      console.log(JSON.stringify([...seen].sort()));
      process.exit(0);
    `;
    try {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: root, env: { ...process.env, RT_HOME: join(dirPath, 'home') } });
      if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as string[];
    } finally {
      rmSync(dirPath, { recursive: true, force: true });
    }
  }

  it('OTLP alone never loads it; Zipkin alone loads it and no OTLP exporter', () => {
    expect(exportersLoaded({ samplingRate: '1', otel: { endpointAddress: '127.0.0.1:9', protocol: 'grpc' } })).toEqual(['@opentelemetry/exporter-trace-otlp-grpc']);
    expect(exportersLoaded({ samplingRate: '1', zipkin: { endpointAddress: 'http://127.0.0.1:9/api/v2/spans' } })).toEqual(['@opentelemetry/exporter-zipkin']);
  }, 120_000);
});
