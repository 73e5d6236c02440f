/**
 * Service invocation under the target app's policy, between two real sidecars and a real app:
 * an app that fails N times then answers gets the same body every try and the caller its answer;
 * a timeout ends the call at the policy's time, aborts the app's request, and names the policy;
 * a 404 (not in `matching`) comes back at once; a body past the replay limit is sent once.
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { REPLAY_LIMIT } from '../../sidecar/src/invoke/resilient.ts';

const POLICY = `apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata:
  name: calls
spec:
  policies:
    timeouts:
      short: 500ms
    retries:
      few: { policy: constant, duration: 20ms, maxRetries: 4, matching: { httpStatusCodes: "500-599" } }
  targets:
    apps:
      target: { timeout: short, retry: few }
`;

describe('invocation under the target app\'s resiliency policy', () => {
  let dir: string;
  let app: Server;
  let caller: Sidecar;
  let target: Sidecar;
  const prevHome = process.env.RT_HOME;
  /** Per path: the bodies the app received, in order. */
  const seen = new Map<string, string[]>();
  const closed: string[] = [];
  let failFirst = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-resiliency-invoke-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url!;
        const list = seen.get(path) ?? [];
        list.push(Buffer.concat(chunks).toString());
        seen.set(path, list);
        if (path === '/slow') {
          res.on('close', () => closed.push(path));
          return; // never answers
        }
        if (path === '/flaky' && list.length <= failFirst) return void res.writeHead(503).end('not yet');
        if (path === '/missing') return void res.writeHead(404).end('no such thing');
        if (path === '/big') return void res.writeHead(503).end('always');
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`took ${list.length}`);
      });
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    const resources = join(dir, 'resources');
    await mkdir(resources);
    await writeFile(join(resources, 'resiliency.yaml'), POLICY);
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    target = await startSidecar({ ...common, appId: 'target', appPort });
    caller = await startSidecar({ ...common, appId: 'caller', resourcesPaths: [resources] });
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

  const invoke = (method: string, body?: string | Buffer) => fetch(`http://127.0.0.1:${caller.httpPort}/v1.0/invoke/target/method/${method}`, { method: 'POST', body });

  it('retries an app that answers 503 three times, sending the same body each time', async () => {
    failFirst = 3;
    const r = await invoke('flaky', 'the same body');
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('took 4');
    expect(seen.get('/flaky')).toEqual(Array(4).fill('the same body'));
    expect(caller.ctx.services.resiliency!.outcomes()).toContainEqual({ target: 'app:target', policy: 'few', outcome: 'retry', count: 3 });
  });

  it('a 404 is the app\'s answer: not retried', async () => {
    const r = await invoke('missing', 'x');
    expect(r.status).toBe(404);
    expect(await r.text()).toBe('no such thing');
    expect(seen.get('/missing')).toHaveLength(1);
  });

  it('the timeout ends each try at 500 ms, aborts the app\'s request, and the caller gets ERR_DIRECT_INVOKE naming it', async () => {
    const t0 = performance.now();
    const r = await invoke('slow', 'patience');
    const ms = performance.now() - t0;
    expect(r.status).toBe(500);
    const body = (await r.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_DIRECT_INVOKE');
    expect(body.message).toMatch(/timeout policy "short" \(500 ms\)/);
    // five tries of 500 ms and four waits of 20 ms
    expect(ms).toBeGreaterThanOrEqual(2500);
    expect(ms).toBeLessThan(8000);
    await vi.waitFor(() => expect(closed).toHaveLength(5), { timeout: 5000, interval: 20 });
  });

  it('a body longer than the replay limit is sent once', async () => {
    // a caller of its own whose policy has the retries and no timeout: 4 MiB through two sidecars
    // may take longer than 500 ms on a machine busy with other work, and this is about the retries
    const resources = join(dir, 'resources-no-timeout');
    await mkdir(resources);
    await writeFile(join(resources, 'resiliency.yaml'), POLICY.replace('      target: { timeout: short, retry: few }', '      target: { retry: few }'));
    const bigCaller = await startSidecar({ httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'big'), logger: pino({ level: 'silent' }), appId: 'big-caller', resourcesPaths: [resources] });
    try {
      const big = Buffer.alloc(REPLAY_LIMIT + 1, 0x61);
      const r = await fetch(`http://127.0.0.1:${bigCaller.httpPort}/v1.0/invoke/target/method/big`, { method: 'POST', body: big });
      expect(r.status).toBe(503);
      expect(seen.get('/big')).toHaveLength(1);
      expect(seen.get('/big')![0].length).toBe(big.length);
    } finally {
      await bigCaller.close();
    }
  });
});
