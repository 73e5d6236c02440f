import { createServer } from 'node:net';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { startSidecar } from '../../sidecar/src/sidecar.ts';
import { freePort } from '../services/net.ts';

const silent = pino({ level: 'silent' });

describe('Prometheus metrics', () => {
  it('serves process and HTTP API metrics on GET /metrics, labelled by route pattern, not by key', async () => {
    const metricsPort = await freePort();
    const s = await startSidecar({ appId: 'metrics-app', httpPort: 0, grpcPort: 0, metricsPort, logger: silent });
    try {
      expect(s.ctx.metrics?.port).toBe(metricsPort);
      const base = `http://127.0.0.1:${s.httpPort}`;
      await fetch(`${base}/v1.0/metadata`);
      await fetch(`${base}/v1.0/state/nope/some-secret-key`);
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const text = await res.text();
      expect(text).toContain('rt_http_server_request_duration_seconds_count{app_id="metrics-app",method="GET",route="/v1.0/metadata",status="200"} 1');
      expect(text).toMatch(/route="\/v1\.0\/state\/:storename\/:key",status="400"/);
      expect(text).not.toContain('some-secret-key');
      expect(text).toMatch(/^rt_process_cpu_user_seconds_total\{app_id="metrics-app"\} [\d.e-]+$/m);
      expect(text).toContain('rt_nodejs_eventloop_lag_seconds');
      const other = await fetch(`http://127.0.0.1:${metricsPort}/other`);
      expect(other.status).toBe(404);
      expect(await other.json()).toMatchObject({ errorCode: 'ERR_NOT_FOUND' });
    } finally {
      await s.close();
    }
  });

  it('a taken metrics port is not fatal: the sidecar runs without metrics', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const s = await startSidecar({ appId: 'taken', httpPort: 0, grpcPort: 0, metricsPort: port, logger: silent });
      expect(s.ctx.metrics).toBeUndefined();
      expect((await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/healthz`)).status).toBe(204);
      await s.close();
    } finally {
      blocker.close();
    }
  });

  it('--disable-metrics (enableMetrics: false) opens no port', async () => {
    const metricsPort = await freePort();
    const s = await startSidecar({ appId: 'off', httpPort: 0, grpcPort: 0, metricsPort, enableMetrics: false, logger: silent });
    try {
      expect(s.ctx.metrics).toBeUndefined();
      await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
    } finally {
      await s.close();
    }
  });
});
