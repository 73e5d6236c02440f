import { createServer, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { RUNTIME_VERSION } from '../../sidecar/src/version.ts';

const silent = pino({ level: 'silent' });

describe('metadata API', () => {
  let dir: string;
  let app: Server;
  let s: Sidecar;
  let base: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-md-'));
    await writeFile(
      join(dir, 'r.yaml'),
      `apiVersion: rt.io/v1alpha1
kind: Component
metadata: {name: pubsub}
spec: {type: pubsub.in-memory, version: v1}
---
apiVersion: rt.io/v1alpha1
kind: Configuration
metadata: {name: cfg}
spec:
  features:
    - {name: FeatureA, enabled: true}
    - {name: FeatureB, enabled: false}
---
apiVersion: rt.io/v2alpha1
kind: Subscription
metadata: {name: orders}
spec:
  pubsubname: pubsub
  topic: orders
  routes: {default: /orders}
---
apiVersion: rt.io/v1alpha1
kind: HTTPEndpoint
metadata: {name: payments}
spec: {baseUrl: "https://payments.invalid"}
`,
    );
    // an app that declares a programmatic subscription and an actor type
    app = createServer((req, res) => {
      if (req.url === '/rt/subscribe') return void res.writeHead(404).end();
      if (req.url === '/dapr/subscribe') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify([{ pubsubname: 'pubsub', topic: 'prog', route: '/prog' }]));
      if (req.url === '/rt/config') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ entities: ['Cart'] }));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    const appPort = (app.address() as { port: number }).port;
    s = await startSidecar({
      appId: 'md-app',
      appPort,
      httpPort: 0,
      grpcPort: 0,
      resourcesPaths: [dir],
      dataDir: dir,
      extended: { cliPID: '42' },
      logger: silent,
    });
    base = `http://127.0.0.1:${s.httpPort}`;
  });

  afterAll(async () => {
    await s?.close();
    app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const metadata = async () => (await (await fetch(`${base}/v1.0/metadata`)).json()) as Record<string, any>;

  it('reports every member of the response object with real values', async () => {
    // app discovery runs once the app is reachable
    let md = await metadata();
    for (let i = 0; i < 50 && md.subscriptions.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 50));
      md = await metadata();
    }
    expect(md.id).toBe('md-app');
    expect(md.runtimeVersion).toBe(RUNTIME_VERSION);
    expect(md.enabledFeatures).toEqual(['FeatureA']);
    expect(md.extended).toMatchObject({ cliPID: '42', runtimeVersion: RUNTIME_VERSION });
    expect(md.httpEndpoints).toEqual([{ name: 'payments' }]);
    expect(md.subscriptions).toEqual([
      { pubsubname: 'pubsub', topic: 'orders', metadata: {}, rules: [{ match: '', path: '/orders' }], deadLetterTopic: '', type: 'DECLARATIVE' },
      { pubsubname: 'pubsub', topic: 'prog', metadata: {}, rules: [{ match: '', path: '/prog' }], deadLetterTopic: '', type: 'PROGRAMMATIC' },
    ]);
    expect(md.actors).toEqual(expect.arrayContaining([{ type: 'Cart', count: 0 }]));
    expect(md.appConnectionProperties).toEqual({
      port: s.ctx.options.appPort,
      protocol: 'http',
      channelAddress: '127.0.0.1',
      maxConcurrency: -1,
      health: { healthCheckPath: '/healthz', healthProbeInterval: '5s', healthProbeTimeout: '500ms', healthThreshold: 3 },
    });
    expect(Array.isArray(md.components)).toBe(true);
    expect(Array.isArray(md.scheduler.connected_addresses)).toBe(true);
  });

  it('PUT stores a raw text attribute under extended, in memory', async () => {
    const put = await fetch(`${base}/v1.0/metadata/owner`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'team {"a":1} ünïcode' });
    expect(put.status).toBe(204);
    expect((await metadata()).extended.owner).toBe('team {"a":1} ünïcode');
    // any content type is taken as raw text, including JSON that would otherwise be parsed
    await fetch(`${base}/v1.0/metadata/json`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"x": 1}' });
    expect((await metadata()).extended.json).toBe('{"x": 1}');
  });

  it('refuses to overwrite the runtime version and bad attribute names with 400 JSON', async () => {
    const r = await fetch(`${base}/v1.0/metadata/runtimeVersion`, { method: 'PUT', body: 'hacked' });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST' });
    expect((await metadata()).extended.runtimeVersion).toBe(RUNTIME_VERSION);
    const bad = await fetch(`${base}/v1.0/metadata/${encodeURIComponent('a b')}`, { method: 'PUT', body: 'x' });
    expect(bad.status).toBe(400);
  });

  it('property: random names, bodies and headers give 204 or a 4xx JSON error and never disturb stored attributes', async () => {
    await fetch(`${base}/v1.0/metadata/keep`, { method: 'PUT', body: 'kept' });
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1, maxLength: 300 }),
        fc.uint8Array({ maxLength: 2048 }),
        fc.constantFrom('text/plain', 'application/json', 'application/octet-stream', 'multipart/form-data', '', 'x/y; charset=bogus'),
        async (name, body, type) => {
          if (name === 'keep') return;
          const headers: Record<string, string> = type ? { 'content-type': type } : {};
          const r = await fetch(`${base}/v1.0/metadata/${encodeURIComponent(name)}`, { method: 'PUT', headers, body });
          expect(r.status === 204 || (r.status >= 400 && r.status < 500)).toBe(true);
          if (r.status !== 204) {
            const e = (await r.json()) as { errorCode: string; message: string };
            expect(typeof e.errorCode).toBe('string');
            expect(e.message.length).toBeGreaterThan(0);
          } else {
            expect((await metadata()).extended[name]).toBe(Buffer.from(body).toString('utf8'));
          }
        },
      ),
      { numRuns: 400 },
    );
    expect((await metadata()).extended.keep).toBe('kept');
    expect((await fetch(`${base}/v1.0/healthz`)).status).toBe(204);
  });
});

describe('API token', () => {
  it('requires rt-api-token or dapr-api-token on every API call except healthz', async () => {
    const s = await startSidecar({ appId: 'tok', httpPort: 0, grpcPort: 0, apiToken: 'tok-123', logger: silent });
    const base = `http://127.0.0.1:${s.httpPort}`;
    try {
      const none = await fetch(`${base}/v1.0/metadata`);
      expect(none.status).toBe(401);
      expect(await none.json()).toMatchObject({ errorCode: 'ERR_UNAUTHORIZED' });
      expect((await fetch(`${base}/v1.0/metadata`, { headers: { 'rt-api-token': 'wrong' } })).status).toBe(401);
      expect((await fetch(`${base}/v1.0/metadata`, { headers: { 'rt-api-token': 'tok-123' } })).status).toBe(200);
      expect((await fetch(`${base}/v1.0/metadata`, { headers: { 'dapr-api-token': 'tok-123' } })).status).toBe(200);
      expect((await fetch(`${base}/v1.0/healthz`)).status).toBe(204);
    } finally {
      await s.close();
    }
  });
});

describe('framework errors', () => {
  it('answers bad percent-encoding and unknown routes with our JSON error shape', async () => {
    const s = await startSidecar({ appId: 'fw', httpPort: 0, grpcPort: 0, logger: silent });
    const base = `http://127.0.0.1:${s.httpPort}`;
    try {
      const bad = await fetch(`${base}/v1.0/metadata/%zz`, { method: 'PUT', body: 'x' });
      expect(bad.status).toBe(400);
      // details carry a google.rpc.ErrorInfo with the code as its reason (the ecosystem's rich error model)
      expect(await bad.json()).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST', details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'ERR_MALFORMED_REQUEST', domain: 'rt.io' }] });
      const none = await fetch(`${base}/v1.0/nothing-here`);
      expect(none.status).toBe(404);
      expect(await none.json()).toMatchObject({ errorCode: 'ERR_NOT_FOUND' });
    } finally {
      await s.close();
    }
  });
});
