/**
 * The OpenTelemetry SDK loads only when a Configuration turns tracing on: a sidecar without one,
 * or with samplingRate "0", never resolves an @opentelemetry module (idle RSS and start time stay
 * as they were), also when it serves the calls that make CLIENT / PRODUCER spans with tracing on
 * (an invocation toward a URL, a publish, a workflow start, a state save, a gRPC SaveState with a
 * traceparent). Checked in a fresh Node process that
 * records every module it resolves.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SIDECAR = resolve(import.meta.dirname, '../../sidecar/src/sidecar.ts');
const PROTO = resolve(import.meta.dirname, '../../sidecar/src/grpc/runtime/proto.ts');

/**
 * Starts a sidecar with this spec.tracing (none: no Configuration) in a child and makes its calls;
 * the @opentelemetry modules it resolved, and the calls' statuses.
 */
function otelModulesLoaded(tracing?: Record<string, unknown>): { modules: string[]; statuses: number[] } {
  const dir = mkdtempSync(join(tmpdir(), 'rt-tracing-lazy-'));
  try {
    const config = join(dir, 'config.yaml');
    if (tracing) writeFileSync(config, JSON.stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'c' }, spec: { tracing } }));
    mkdirSync(join(dir, 'resources'));
    writeFileSync(join(dir, 'resources', 'bus.yaml'), JSON.stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'bus' }, spec: { type: 'pubsub.in-memory', version: 'v1' } }));
    writeFileSync(join(dir, 'resources', 'store.yaml'), JSON.stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'store' }, spec: { type: 'state.in-memory', version: 'v1' } }));
    const script = `
      import { registerHooks } from 'node:module';
      const seen = new Set();
      // @opentelemetry/api is prom-client's own dependency (the metrics block loads it): not the SDK
      registerHooks({ resolve(spec, ctx, next) { if (spec.startsWith('@opentelemetry/') && spec !== '@opentelemetry/api') seen.add(spec); return next(spec, ctx); } });
      const { startSidecar } = await import(${JSON.stringify(SIDECAR)});
      const pino = (await import('pino')).default;
      const { createServer } = await import('node:http');
      const target = createServer((req, res) => res.end('ok'));
      await new Promise((r) => target.listen(0, '127.0.0.1', r));
      const s = await startSidecar({ appId: 'lazy', httpPort: 0, grpcPort: 0, resourcesPaths: [${JSON.stringify(join(dir, 'resources'))}], ${tracing ? `configFile: ${JSON.stringify(config)},` : ''} dataDir: ${JSON.stringify(join(dir, 'data'))}, logger: pino({ level: 'silent' }) });
      const base = 'http://127.0.0.1:' + s.httpPort;
      const headers = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'content-type': 'application/json' };
      const statuses = [];
      for (const [path, method, body] of [
        ['/v1.0/metadata', 'GET'],
        ['/v1.0/invoke/' + encodeURIComponent('http://127.0.0.1:' + target.address().port) + '/method/x', 'POST', '{}'],
        ['/v1.0/publish/bus/t', 'POST', '{"a":1}'],
        ['/v1.0/workflows/dapr/w/start?instanceID=lazy-1', 'POST', '1'],
        ['/v1.0/state/store', 'POST', '[{"key":"k","value":1}]'],
      ]) statuses.push((await fetch(base + path, { method, headers, body })).status);
      // a gRPC API call with a traceparent (a component call under it: a state save)
      const grpc = await import('@grpc/grpc-js');
      const { runtimeClient } = await import(${JSON.stringify(PROTO)});
      const client = new (runtimeClient())('127.0.0.1:' + s.grpcPort, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set('traceparent', headers.traceparent);
      statuses.push(await new Promise((r) => client.SaveState({ store_name: 'store', states: [{ key: 'g', value: Buffer.from('1') }] }, md, (e) => r(e ? e.code : 0))));
      client.close();
      await s.close();
      target.close();
      console.log(JSON.stringify({ modules: [...seen].sort(), statuses }));
      process.exit(0);
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: resolve(import.meta.dirname, '../..') });
    if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { modules: string[]; statuses: number[] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the OpenTelemetry SDK is loaded lazily', () => {
  it('not without tracing nor at samplingRate "0"; with tracing on, the SDK and the configured exporter only', () => {
    // metadata, invoke toward a URL, publish, workflow start, a state save (a component call), a gRPC SaveState (0: OK): each served
    const served = [200, 200, 204, 202, 204, 0];
    expect(otelModulesLoaded()).toEqual({ modules: [], statuses: served });
    expect(otelModulesLoaded({ samplingRate: '0', otel: { endpointAddress: '127.0.0.1:4317' } })).toEqual({ modules: [], statuses: served });
    const { modules: on, statuses } = otelModulesLoaded({ samplingRate: '1', otel: { endpointAddress: '127.0.0.1:9', protocol: 'http' } });
    expect(statuses).toEqual(served);
    expect(on).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-proto']));
    expect(on).not.toContain('@opentelemetry/exporter-trace-otlp-grpc');
  }, 90_000);
});
