/**
 * An app server that closes a kept-alive connection right after an answer, without saying so
 * (uvicorn after an unhandled error does this): the next call through the sidecar must not fail
 * with "other side closed". A request without a body is sent again, once, on a new connection.
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('invoke: an app that drops kept-alive connections unannounced', () => {
  let dir: string;
  let app: Server;
  let sidecar: Sidecar;
  let pool: Pool;
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-stale-'));
    process.env.RT_HOME = join(dir, 'home');
    // sockets the app has given up on after an error, though it answered with keep-alive
    const doomed = new WeakSet<object>();
    app = createServer((req, res) => {
      req.resume();
      if (doomed.has(req.socket)) {
        // what the sidecar sends next on that connection meets a closed socket
        req.socket.destroy();
        return;
      }
      if (req.url === '/crash') {
        res.writeHead(500, { 'content-type': 'text/plain', 'content-length': '5' });
        res.end('crash');
        doomed.add(req.socket);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`ok ${req.method}`);
    });
    app.keepAliveTimeout = 60_000;
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    sidecar = await startSidecar({ appId: 'dropper', appPort, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) });
    pool = new Pool(`http://127.0.0.1:${sidecar.httpPort}`, { connections: 1 });
  });
  afterAll(async () => {
    await pool?.close();
    await sidecar?.close();
    app?.closeAllConnections();
    app?.close();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  it('the call after a dropped connection is answered, for every verb sent without a body', async () => {
    const call = async (method: string, path: string) => {
      const res = await pool.request({ method, path: `/v1.0/invoke/dropper/method${path}` });
      return { status: res.statusCode, text: await res.body.text() };
    };
    for (let i = 0; i < 20; i++) {
      for (const method of ['GET', 'DELETE', 'POST']) {
        expect(await call('GET', '/crash')).toEqual({ status: 500, text: 'crash' });
        expect(await call(method, '/next')).toEqual({ status: 200, text: `ok ${method}` });
      }
    }
  });
});
