/**
 * Pluggable bindings: one socket serving a state store and an output binding (the example
 * component) used by two component specs; an input binding whose events reach the app and
 * whose acks carry the app's answer.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { freePort } from '../services/net.ts';
import { json, ok, sidecarFor, startTestServer, tempDirs, useExampleSidecar, writeComponents, type TempDirs } from './helpers.ts';

describe('one socket serving a state store and an output binding', () => {
  const env = useExampleSidecar(
    [
      { name: 'store', type: 'state.memstore' },
      { name: 'files', type: 'bindings.memstore' },
    ],
    'bindings-app',
  );
  let base: string;
  beforeAll(() => {
    base = env.base;
  });

  it('both specs load; metadata reports each with its capabilities', async () => {
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string; type: string; capabilities: string[] }[] };
    const byName = Object.fromEntries(md.components.map((c) => [c.name, c]));
    expect(byName.files).toMatchObject({ type: 'bindings.memstore', capabilities: ['OUTPUT_BINDING'] });
    expect(byName.store).toMatchObject({ type: 'state.memstore', capabilities: ['ETAG', 'TRANSACTIONAL', 'QUERY_API'] });
  });

  it('the binding API invokes the component; each spec has its own data', async () => {
    const create = await fetch(`${base}/v1.0/bindings/files`, json({ operation: 'create', data: 'hello file', metadata: { key: 'a.txt' } }));
    expect(create.status).toBe(204);
    expect(create.headers.get('metadata.key')).toBe('a.txt');
    const get = await fetch(`${base}/v1.0/bindings/files`, json({ operation: 'get', metadata: { key: 'a.txt' } }));
    expect(get.status).toBe(200);
    expect(await get.text()).toBe('hello file');
    const list = await fetch(`${base}/v1.0/bindings/files`, json({ operation: 'list' }));
    expect(await list.json()).toEqual(['a.txt']);
    // same socket, other instance: the state store does not see the binding's item
    expect((await fetch(`${base}/v1.0/state/store/a.txt`)).status).toBe(204);
    expect((await fetch(`${base}/v1.0/state/store`, json([{ key: 'k', value: 1 }]))).status).toBe(204);
    expect(await (await fetch(`${base}/v1.0/state/store/k`)).json()).toBe(1);
  });

  it('an operation the component does not list is a 400 naming the ones it does', async () => {
    const res = await fetch(`${base}/v1.0/bindings/files`, json({ operation: 'explode' }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain('create, get, delete, list');
  });

  it('an error of the component is a 500 with its message', async () => {
    const res = await fetch(`${base}/v1.0/bindings/files`, json({ operation: 'get', metadata: { key: 'nope' } }));
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_INVOKE_OUTPUT_BINDING');
    expect(body.message).toContain('no item "nope"');
  });
});

describe('pluggable input binding', () => {
  let dirs: TempDirs;
  let app: Server;
  let sidecar: Sidecar | undefined;
  let server: grpc.Server | undefined;

  beforeAll(() => {
    dirs = tempDirs();
  });

  afterAll(async () => {
    await sidecar?.close();
    server?.forceShutdown();
    app?.close();
    dirs?.cleanup();
  });

  it('events of the Read stream reach the app; the app answer goes back as the ack', async () => {
    const received: { path: string; body: string; header?: string }[] = [];
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        // the sidecar also asks the app for its subscriptions and config (GETs)
        if (req.method !== 'POST') return void res.writeHead(404).end();
        received.push({ path: req.url!, body, header: req.headers['metadata.source'] as string | undefined });
        if (body.includes('reject')) res.writeHead(500).end('no thanks');
        else res.writeHead(200, { 'content-type': 'application/json' }).end('{"handled":true}');
      });
    });
    const appPort = await freePort();
    await new Promise<void>((r) => app.listen(appPort, '127.0.0.1', r));

    const acks: { messageId: string; data: string; error?: string }[] = [];
    let inits = 0;
    server = await startTestServer(join(dirs.sockets, 'events.sock'), {
      InputBinding: {
        Init: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => {
          inits++;
          cb(null, {});
        },
        Ping: ok({}),
        Read: (call: grpc.ServerDuplexStream<{ messageId: string; responseData: Buffer; responseError: { message: string } | null }, unknown>) => {
          call.on('data', (ack) => acks.push({ messageId: ack.messageId, data: ack.responseData.toString(), error: ack.responseError?.message }));
          call.write({ data: Buffer.from('{"n":1}'), metadata: { source: 'test' }, contentType: 'application/json', messageId: 'm1' });
          call.write({ data: Buffer.from('"reject"'), metadata: {}, contentType: 'application/json', messageId: 'm2' });
        },
      },
    });
    writeComponents(dirs.resources, [{ name: 'incoming', type: 'bindings.events' }]);
    sidecar = await sidecarFor(dirs, 'input-app', { appPort });
    for (let i = 0; i < 100 && acks.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect(inits).toBe(1);
    expect(received.map((r) => r.path)).toEqual(['/incoming', '/incoming']);
    expect(received[0]).toMatchObject({ body: '{"n":1}', header: 'test' });
    const byId = Object.fromEntries(acks.map((a) => [a.messageId, a]));
    expect(byId.m1).toMatchObject({ data: '{"handled":true}', error: undefined });
    expect(byId.m2.error).toContain('500');
    const md = (await (await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/metadata`)).json()) as { components: unknown[] };
    expect(md.components).toContainEqual({ name: 'incoming', type: 'bindings.events', version: 'v1', capabilities: ['INPUT_BINDING'] });

    // the component restarts: rt sends Init again and reopens the Read stream
    server.forceShutdown();
    server = await startTestServer(join(dirs.sockets, 'events.sock'), {
      InputBinding: {
        Init: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => {
          inits++;
          cb(null, {});
        },
        Ping: ok({}),
        Read: (call: grpc.ServerDuplexStream<{ messageId: string; responseData: Buffer }, unknown>) => {
          call.on('data', (ack) => acks.push({ messageId: ack.messageId, data: ack.responseData.toString() }));
          call.write({ data: Buffer.from('{"n":3}'), metadata: {}, contentType: 'application/json', messageId: 'm3' });
        },
      },
    });
    for (let i = 0; i < 200 && !acks.some((a) => a.messageId === 'm3'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(received.map((r) => r.body)).toContain('{"n":3}');
    expect(acks.find((a) => a.messageId === 'm3')).toMatchObject({ data: '{"handled":true}' });
    expect(inits).toBe(2);
  }, 20_000);
});
