/**
 * The internal port's two protocols: sidecars call each other over HTTP/1.1 keep-alive, and the
 * same port still takes the gRPC CallStream (RT_INVOKE_TRANSPORT=grpc on the caller). Both give
 * the app the same request and the caller the same answer; the hop's own headers cannot be
 * forged by an app; the port answers a request that is no sidecar's call with a 400; and a
 * proxied gRPC call needs the API token.
 * Real sidecars in this process, found through a private registry (RT_HOME).
 */
import { statSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEntries, registryDir } from '../../sidecar/src/invoke/registry/local.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('the internal port: HTTP/1.1 and gRPC on one port', () => {
  let dir: string;
  let app: Server;
  const sidecars: Record<string, Sidecar> = {};
  const prev = { home: process.env.RT_HOME, transport: process.env.RT_INVOKE_TRANSPORT };
  let internalPort = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-transports-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(201, { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'], 'x-app': 'target' });
        res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() }));
      });
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    sidecars.target = await startSidecar({ ...common, appId: 'target', appPort });
    sidecars.overHttp = await startSidecar({ ...common, appId: 'caller-http' });
    sidecars.guarded = await startSidecar({ ...common, appId: 'guarded', apiToken: 's3cret' });
    process.env.RT_INVOKE_TRANSPORT = 'grpc';
    sidecars.overGrpc = await startSidecar({ ...common, appId: 'caller-grpc' });
    internalPort = listEntries(registryDir()).find((e) => e.appId === 'target')!.internalGrpcPort;
  });
  afterAll(async () => {
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    app?.close();
    for (const [k, v] of [['RT_HOME', prev.home], ['RT_INVOKE_TRANSPORT', prev.transport]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await rm(dir, { recursive: true, force: true });
  });

  const call = (from: Sidecar, init: RequestInit & { headers?: Record<string, string> }) => fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/target/method/things/1?x=1&x=2`, init);

  it('gives the app the same request and the caller the same answer over either transport', async () => {
    for (const [name, from] of [['caller-http', sidecars.overHttp], ['caller-grpc', sidecars.overGrpc]] as const) {
      const res = await call(from, { method: 'PUT', headers: { 'content-type': 'text/plain', 'x-custom': 'v' }, body: 'payload' });
      expect(res.status).toBe(201);
      expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      expect(res.headers.get('x-app')).toBe('target');
      const got = (await res.json()) as { method: string; url: string; headers: Record<string, string>; body: string };
      expect(got).toMatchObject({ method: 'PUT', url: '/things/1?x=1&x=2', body: 'payload' });
      expect(got.headers).toMatchObject({ 'x-custom': 'v', 'content-type': 'text/plain', 'rt-caller-app-id': name, 'dapr-callee-app-id': 'target' });
      expect(Object.keys(got.headers).filter((h) => h.startsWith('rt-invoke-'))).toEqual([]);
    }
  });

  it('gives the app the body of a GET over either transport, and a GET without a body none', async () => {
    // node:http, not fetch: fetch refuses a body on a GET
    const get = (from: Sidecar, headers: Record<string, string>, body?: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: from.httpPort, method: 'GET', path: '/v1.0/invoke/target/method/things/1', headers }, (r) => {
          let text = '';
          r.on('data', (c: Buffer) => (text += c.toString()));
          r.on('end', () => resolve({ status: r.statusCode!, body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    for (const [name, from] of [['caller-http', sidecars.overHttp], ['caller-grpc', sidecars.overGrpc]] as const) {
      const res = await get(from, { 'content-type': 'text/plain', 'content-length': '7' }, 'message');
      expect(res.status, name).toBe(201);
      const got = JSON.parse(res.body) as { method: string; headers: Record<string, string>; body: string };
      expect(got, name).toMatchObject({ method: 'GET', body: 'message', headers: { 'content-type': 'text/plain', 'content-length': '7' } });
      const none = JSON.parse((await get(from, {})).body) as { headers: Record<string, string>; body: string };
      expect(none.body, name).toBe('');
      expect(none.headers['content-length'], name).toBeUndefined();
      expect(none.headers['transfer-encoding'], name).toBeUndefined();
    }
  });

  it("does not let an app forge the hop's caller or target headers", async () => {
    const res = await call(sidecars.overHttp, { method: 'GET', headers: { 'rt-invoke-caller-app-id': 'admin', 'rt-invoke-target': 'someone-else' } });
    expect(res.status).toBe(201);
    const got = (await res.json()) as { headers: Record<string, string> };
    expect(got.headers['rt-caller-app-id']).toBe('caller-http');
  });

  it('asks an HTTP invocation for the API token (the route served ahead of fastify checks it the same)', async () => {
    const url = `http://127.0.0.1:${sidecars.guarded.httpPort}/v1.0/invoke/target/method/things/1`;
    const refused = await fetch(url, { method: 'POST', body: 'x' });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { errorCode: string }).errorCode).toBe('ERR_UNAUTHORIZED');
    expect((await fetch(url, { headers: { 'rt-api-token': 'wrong' } })).status).toBe(401);
    for (const name of ['rt-api-token', 'dapr-api-token']) {
      const ok = await fetch(url, { headers: { [name]: 's3cret' } });
      expect(ok.status).toBe(201);
      // the caller's token for its own sidecar does not travel on
      expect(((await ok.json()) as { headers: Record<string, string> }).headers[name]).toBeUndefined();
    }
    // a malformed path is a JSON 400 there too
    const bad = await fetch(`http://127.0.0.1:${sidecars.overHttp.httpPort}/v1.0/invoke/target/nomethod`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
  });

  it('passes an encoded body through as sent, with its content-encoding and length', async () => {
    const gz = gzipSync(Buffer.from('payload '.repeat(100)));
    const res = await call(sidecars.overHttp, { method: 'POST', headers: { 'content-encoding': 'gzip', 'content-type': 'text/plain' }, body: gz });
    expect(res.status).toBe(201);
    const got = (await res.json()) as { headers: Record<string, string> };
    expect(got.headers).toMatchObject({ 'content-encoding': 'gzip', 'content-length': String(gz.length) });
    // the same through the rt-app-id header form (fastify's route): not decoded on the way
    const viaHeader = await fetch(`http://127.0.0.1:${sidecars.overHttp.httpPort}/things/2`, { method: 'POST', headers: { 'rt-app-id': 'target', 'content-encoding': 'gzip', 'content-type': 'text/plain' }, body: gz });
    expect(viaHeader.status).toBe(201);
    const sent = (await viaHeader.json()) as { url: string; headers: Record<string, string>; body: string };
    expect(sent.url).toBe('/things/2');
    expect(sent.headers).toMatchObject({ 'content-encoding': 'gzip', 'content-length': String(gz.length) });
  });

  it('listens on a Unix socket too (standalone), named in the registry, which the same calls reach', async () => {
    const entry = listEntries(registryDir()).find((e) => e.appId === 'target')!;
    expect(statSync(entry.internalSocket!).isSocket()).toBe(true);
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ socketPath: entry.internalSocket, path: '/over-unix', headers: { 'rt-invoke-target': 'target', 'rt-invoke-caller-app-id': 'local' } }, (r) => {
        let body = '';
        r.on('data', (c: Buffer) => (body += c.toString()));
        r.on('end', () => resolve({ status: r.statusCode!, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(res.status).toBe(201);
    expect(JSON.parse(res.body)).toMatchObject({ url: '/over-unix', headers: { 'rt-caller-app-id': 'local' } });
  });

  it('answers a plain HTTP request that is no sidecar call with 400, and a call for another app id with ERR_DIRECT_INVOKE', async () => {
    const plain = await fetch(`http://127.0.0.1:${internalPort}/things`);
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ errorCode: 'ERR_MALFORMED_REQUEST', message: expect.stringMatching(/rt-invoke-target/) });
    const wrong = await fetch(`http://127.0.0.1:${internalPort}/things`, { headers: { 'rt-invoke-target': 'other' } });
    expect(wrong.status).toBe(500);
    expect(wrong.headers.get('rt-invoke-error')).toBe('ERR_DIRECT_INVOKE');
    expect(await wrong.json()).toMatchObject({ errorCode: 'ERR_DIRECT_INVOKE', message: expect.stringMatching(/serves app id "target", not "other"/) });
  });

  it('survives any bytes sent to the internal port (either protocol), and keeps answering calls', async () => {
    const send = (bytes: Uint8Array) =>
      new Promise<void>((resolve) => {
        const s = connect(internalPort, '127.0.0.1', () => s.end(bytes));
        s.on('data', () => undefined);
        s.on('error', () => resolve());
        s.on('close', () => resolve());
        setTimeout(() => s.destroy(), 2000);
      });
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), b])), fc.string({ maxLength: 200 }).map((t) => Buffer.from(`GET /${t} HTTP/1.1\r\nrt-invoke-target: target\r\n${t}\r\n\r\n`))), async (bytes) => {
        await send(bytes);
      }),
      { numRuns: 60 },
    );
    const res = await call(sidecars.overHttp, { method: 'GET' });
    expect(res.status).toBe(201);
  });

  it("asks a proxied gRPC call for the sidecar's API token like any other", async () => {
    const client = new grpc.Client(`127.0.0.1:${sidecars.guarded.grpcPort}`, grpc.credentials.createInsecure());
    const proxied = (token?: string) => {
      const md = new grpc.Metadata();
      md.set('rt-app-id', 'target');
      if (token) md.set('rt-api-token', token);
      return new Promise<grpc.ServiceError | null>((resolve) =>
        client.makeUnaryRequest('/some.Service/Method', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), md, { deadline: Date.now() + 5000 }, (e) => resolve(e)),
      );
    };
    try {
      expect((await proxied())?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect((await proxied('wrong'))?.code).toBe(grpc.status.UNAUTHENTICATED);
      // with the token it goes through to the target's sidecar, whose app does not speak gRPC
      const through = await proxied('s3cret');
      expect(through?.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(through?.details).toMatch(/app "target" does not speak gRPC/);
    } finally {
      client.close();
    }
  });

  it('answers UNIMPLEMENTED to a gRPC call of an unknown method without the hop metadata', async () => {
    const client = new grpc.Client(`127.0.0.1:${internalPort}`, grpc.credentials.createInsecure());
    try {
      const err = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.makeUnaryRequest('/some.Service/Method', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e) => resolve(e)),
      );
      expect(err?.code).toBe(grpc.status.UNIMPLEMENTED);
    } finally {
      client.close();
    }
  });
});
