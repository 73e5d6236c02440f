/**
 * The OpenTelemetry SDK loads only when a Configuration turns tracing on: a sidecar without one,
 * or with samplingRate "0", never resolves an @opentelemetry module (idle RSS and start time stay
 * as they were). Checked in a fresh Node process that records every module it resolves.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SIDECAR = resolve(import.meta.dirname, '../../sidecar/src/sidecar.ts');

/** Starts a sidecar with this spec.tracing (none: no Configuration) in a child; the @opentelemetry modules it resolved. */
function otelModulesLoaded(tracing?: Record<string, unknown>): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'rt-tracing-lazy-'));
  try {
    const config = join(dir, 'config.yaml');
    if (tracing) writeFileSync(config, JSON.stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'c' }, spec: { tracing } }));
    const script = `
      import { registerHooks } from 'node:module';
      const seen = new Set();
      // @opentelemetry/api is prom-client's own dependency (the metrics block loads it): not the SDK
      registerHooks({ resolve(spec, ctx, next) { if (spec.startsWith('@opentelemetry/') && spec !== '@opentelemetry/api') seen.add(spec); return next(spec, ctx); } });
      const { startSidecar } = await import(${JSON.stringify(SIDECAR)});
      const pino = (await import('pino')).default;
      const s = await startSidecar({ appId: 'lazy', httpPort: 0, grpcPort: 0, resourcesPaths: [], ${tracing ? `configFile: ${JSON.stringify(config)},` : ''} dataDir: ${JSON.stringify(join(dir, 'data'))}, logger: pino({ level: 'silent' }) });
      await fetch('http://127.0.0.1:' + s.httpPort + '/v1.0/metadata', { headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
      await s.close();
      console.log(JSON.stringify([...seen].sort()));
      process.exit(0);
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: resolve(import.meta.dirname, '../..') });
    if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the OpenTelemetry SDK is loaded lazily', () => {
  it('not without tracing nor at samplingRate "0"; with tracing on, the SDK and the configured exporter only', () => {
    expect(otelModulesLoaded()).toEqual([]);
    expect(otelModulesLoaded({ samplingRate: '0', otel: { endpointAddress: '127.0.0.1:4317' } })).toEqual([]);
    const on = otelModulesLoaded({ samplingRate: '1', otel: { endpointAddress: '127.0.0.1:9', protocol: 'http' } });
    expect(on).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-proto']));
    expect(on).not.toContain('@opentelemetry/exporter-trace-otlp-grpc');
  }, 90_000);
});
