/**
 * A streamed output binding call (bindings.sftp `create` whose `data` the sidecar streams to the
 * server as it reads the request) makes the same CLIENT span as a buffered call, under the API's
 * SERVER span, as a real Jaeger receives it; against a real sshd.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { startSshd, type SshdServer } from '../services/sshd.ts';
import { sshdAvailable } from '../bindings/sftp/helpers.ts';
import { startTracedSidecar, tracingFolder } from './harness.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '') && sshdAvailable;
const APP = `streamed-${process.pid}-${Date.now().toString(36)}`;

describe.skipIf(!available)('a streamed output binding call, exported to Jaeger (real sshd)', () => {
  let jaeger: Jaeger;
  let sshd: SshdServer;
  let remove: (() => Promise<void>) | undefined;
  let sidecar: Sidecar | undefined;

  beforeAll(async () => {
    jaeger = await startJaeger();
    sshd = await startSshd();
    const metadata = { rootPath: sshd.root, address: sshd.address, username: sshd.username, password: sshd.password, hostPublicKey: sshd.hostKeys.ed25519 };
    let dir: string;
    ({ dir, remove } = await tracingFolder('rt-streamed-tracing-', jaeger, [
      { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'files' }, spec: { type: 'bindings.sftp', version: 'v1', metadata: Object.entries(metadata).map(([name, value]) => ({ name, value })) } },
    ]));
    sidecar = await startTracedSidecar(dir, APP);
  }, 120_000);

  afterAll(async () => {
    await sidecar?.close();
    await sshd?.close();
    await jaeger?.stop();
    await remove?.();
  });

  it('a create whose data is streamed is a CLIENT span under the API call, with the binding and operation', async () => {
    const traceId = hex(16);
    const root = hex(8);
    // 3 MiB: the operation comes before the data, so the sidecar streams it to the server
    const content = randomBytes(3 * 1024 * 1024);
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/bindings/files`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${root}-01` },
      body: JSON.stringify({ operation: 'create', data: content.toString('base64'), metadata: { fileName: 'streamed.bin' } }),
    });
    expect(res.status).toBe(200);
    expect((await readFile(join(sshd.root, 'streamed.bin'))).equals(content)).toBe(true);

    const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
    const api = spans.find((s) => s.kind === 'server');
    expect(api).toMatchObject({ serviceName: APP, parentSpanId: root, tags: expect.objectContaining({ 'http.route': '/v1.0/bindings/:name' }) });
    const client = spans.filter((s) => s.kind === 'client');
    expect(client).toHaveLength(1);
    expect(client[0]).toMatchObject({
      operationName: 'bindings/files create',
      parentSpanId: api!.spanId,
      tags: expect.objectContaining({ 'rt.component': 'files', 'rt.operation': 'bindings.create', 'rt.app_id': APP }),
    });
    expect(client[0]!.tags['otel.status_code']).not.toBe('ERROR');
  }, 60_000);

  it('a streamed create the server refuses (a path outside the root) ends its span with an error', async () => {
    const traceId = hex(16);
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/bindings/files`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-01` },
      body: JSON.stringify({ operation: 'create', data: randomBytes(1024 * 1024).toString('base64'), metadata: { fileName: '../outside/escape.bin' } }),
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
    const client = spans.find((s) => s.kind === 'client');
    expect(client).toMatchObject({ operationName: 'bindings/files create' });
    expect(client!.tags['otel.status_code'] === 'ERROR' || client!.tags.error === true).toBe(true);
  }, 60_000);
});
