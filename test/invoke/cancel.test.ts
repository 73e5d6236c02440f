/**
 * A caller that goes away mid-call: the target app's request is aborted too (nothing keeps
 * running for nobody), and neither sidecar is hurt — both answer the next call.
 */
import { createServer, request, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('invocation cut off by the caller', () => {
  let dir: string;
  let app: Server;
  let caller: Sidecar;
  let target: Sidecar;
  const closed: string[] = [];
  /** The paths of the requests that reached the app. */
  const arrived: string[] = [];
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-cancel-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      arrived.push(req.url!);
      if (req.url === '/hang') {
        // answers never; notes when the sidecar gives up on it
        res.on('close', () => closed.push(req.url!));
        req.resume();
        return;
      }
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    target = await startSidecar({ ...common, appId: 'target', appPort });
    caller = await startSidecar({ ...common, appId: 'caller' });
  });
  afterAll(async () => {
    await caller?.close();
    await target?.close();
    app?.closeAllConnections();
    app?.close();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  /** Leaves mid-call: once the call has reached the app (its answer, or its body, still to come). */
  const leaveMidCall = async (method: string, path: string, body?: boolean) => {
    const at = path.slice(path.lastIndexOf('/'));
    const count = () => arrived.filter((p) => p === at).length;
    const before = count();
    const req = request({ host: '127.0.0.1', port: caller.httpPort, method, path, headers: body ? { 'transfer-encoding': 'chunked' } : {} });
    req.on('error', () => undefined);
    if (body) req.write(Buffer.alloc(64 * 1024, 1)); // a body that never ends
    else req.end();
    await vi.waitFor(() => expect(count()).toBe(before + 1), { timeout: 10_000, interval: 10 });
    req.destroy();
  };

  it('aborts the app request when the caller leaves, and both sidecars keep answering', async () => {
    await leaveMidCall('GET', '/v1.0/invoke/target/method/hang');
    await leaveMidCall('POST', '/v1.0/invoke/target/method/hang', true);
    await leaveMidCall('POST', '/v1.0/invoke/target/method/echo', true);
    for (let i = 0; i < 100 && closed.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect(closed).toEqual(['/hang', '/hang']);
    const again = await fetch(`http://127.0.0.1:${caller.httpPort}/v1.0/invoke/target/method/echo`, { method: 'POST', body: 'x' });
    expect(again.status).toBe(200);
    expect(await again.text()).toBe('ok');
  });
});
