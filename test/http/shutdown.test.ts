/**
 * Stopping a sidecar while a request is in flight on a keep-alive connection: the request gets
 * its answer, and the close ends that connection once the answer is out instead of waiting for
 * node:http's keep-alive timeout or the 5 s shutdown grace.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar } from '../../sidecar/src/sidecar.ts';

const SLOW_MS = 300;
let app: Server;
let appPort: number;
let received = 0;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rt-shutdown-'));
  app = createServer((req, res) => {
    if (req.url === '/slow') received++;
    req.resume();
    setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('done'), SLOW_MS);
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appPort = (app.address() as AddressInfo).port;
});

afterAll(async () => {
  app.closeAllConnections();
  await new Promise((r) => app.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe('sidecar shutdown', () => {
  it('answers a request in flight on a keep-alive connection, then ends the connection at once', async () => {
    const s = await startSidecar({ appId: 'shutdown', appPort, httpPort: 0, grpcPort: 0, metricsPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), logger: pino({ level: 'silent' }) });
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    try {
      const url = `http://127.0.0.1:${s.httpPort}/v1.0/invoke/shutdown/method/slow`;
      // one call first, so the connection is a kept-alive one when the second goes out on it
      expect((await request(url, { dispatcher: agent })).statusCode).toBe(200);
      const inFlight = request(url, { dispatcher: agent }).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
      const deadline = Date.now() + 10_000;
      while (received < 2) {
        if (Date.now() > deadline) throw new Error('the app never got the second call');
        await new Promise((r) => setTimeout(r, 5));
      }
      const started = Date.now();
      await s.close();
      const took = Date.now() - started;
      expect(await inFlight).toEqual({ status: 200, body: 'done' });
      // the answer takes SLOW_MS; node:http's keep-alive (5 s) and the grace (5 s) are not waited for
      expect(took).toBeLessThan(3000);
    } finally {
      await s.close();
      await agent.close();
    }
  });
});
