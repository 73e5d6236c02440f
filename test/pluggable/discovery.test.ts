/**
 * Discovery of pluggable components in the socket folder: reflection decides the types,
 * metadata reports them, and the cases that go wrong give clear errors.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { componentsDefinition, reflectionDefinition } from '../../sidecar/src/pluggable/protos.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { ok, sidecarFor, startTestServer, tempDirs, writeComponents, type TempDirs } from './helpers.ts';

let dirs: TempDirs;
const servers: grpc.Server[] = [];
const sidecars: Sidecar[] = [];

afterEach(async () => {
  for (const s of sidecars.splice(0)) await s.close();
  for (const s of servers.splice(0)) s.forceShutdown();
  dirs?.cleanup();
});

/** A state store server that records the Init calls it gets (instance header → properties). */
async function stateServer(path: string, inits: { instance: string; properties: Record<string, string> }[] = []) {
  const server = await startTestServer(path, {
    StateStore: {
      Init: (call: grpc.ServerUnaryCall<{ metadata: { properties: Record<string, string> } }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        inits.push({ instance: String(call.metadata.get('x-component-instance')[0]), properties: call.request.metadata.properties });
        cb(null, {});
      },
      Features: ok({ features: ['ETAG'] }),
      Ping: ok({}),
      Get: ok({ data: Buffer.from('"v"'), etag: { value: '1' } }),
    },
  });
  servers.push(server);
  return inits;
}

async function start(appId?: string): Promise<Sidecar> {
  const s = await sidecarFor(dirs, appId);
  sidecars.push(s);
  return s;
}

describe('pluggable discovery', () => {
  it('registers <api>.<socket name> for each API a socket serves; metadata shows type, version and capabilities', async () => {
    dirs = tempDirs();
    const inits = await stateServer(join(dirs.sockets, 'my-comp.sock'));
    writeFileSync(join(dirs.sockets, 'notes.txt'), 'not a socket');
    writeComponents(dirs.resources, [{ name: 'orders', type: 'state.my-comp', metadata: { tableName: 'orders' } }]);
    const s = await start();
    const info = s.ctx.components.catalog.get('state.my-comp');
    expect(info?.pluggable).toBe(true);
    expect(s.ctx.components.catalog.has('bindings.my-comp')).toBe(false);
    expect(s.ctx.components.catalog.list().some((t) => t.endsWith('.notes'))).toBe(false);
    // Init got the spec's metadata and the instance header
    expect(inits).toEqual([{ instance: 'orders', properties: { tableName: 'orders' } }]);
    const md = (await (await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/metadata`)).json()) as { components: unknown[] };
    expect(md.components).toContainEqual({ name: 'orders', type: 'state.my-comp', version: 'v1', capabilities: ['ETAG'] });
  });

  it('serves several component specs from one socket, each call naming its instance', async () => {
    dirs = tempDirs();
    const inits = await stateServer(join(dirs.sockets, 'shared.sock'));
    writeComponents(dirs.resources, [
      { name: 'first', type: 'state.shared', metadata: { n: '1' } },
      { name: 'second', type: 'state.shared', metadata: { n: '2' } },
    ]);
    await start();
    expect(inits.map((i) => [i.instance, i.properties.n]).sort()).toEqual([
      ['first', '1'],
      ['second', '2'],
    ]);
  });

  it('finds components whose server only speaks the older reflection protocol (v1alpha)', async () => {
    dirs = tempDirs();
    const server = new grpc.Server();
    const def = componentsDefinition();
    server.addService(def['dapr.proto.components.v1.StateStore'] as grpc.ServiceDefinition, {
      Init: ok({}),
      Features: ok({ features: ['ETAG'] }),
      Ping: ok({}),
    });
    // a hand-written v1alpha reflection service: it answers ListServices only
    server.addService(reflectionDefinition()['grpc.reflection.v1alpha.ServerReflection'] as grpc.ServiceDefinition, {
      ServerReflectionInfo: (call: grpc.ServerDuplexStream<{ listServices?: string }, unknown>) => {
        call.on('data', () => call.write({ listServicesResponse: { service: [{ name: 'dapr.proto.components.v1.StateStore' }] } }));
        call.on('end', () => call.end());
      },
    });
    await new Promise<void>((r, j) => server.bindAsync(`unix:${join(dirs.sockets, 'old.sock')}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? j(e) : r())));
    servers.push(server);
    writeComponents(dirs.resources, [{ name: 'legacy', type: 'state.old' }]);
    const s = await start();
    expect(s.ctx.components.catalog.get('state.old')?.pluggable).toBe(true);
    expect(s.ctx.components.stateStore('legacy')?.features()).toEqual(['ETAG']);
  });

  it('a missing socket folder or an empty one is no error', async () => {
    dirs = tempDirs();
    dirs.sockets = join(dirs.root, 'does-not-exist');
    const s = await start();
    expect(s.ctx.components.catalog.list().filter((t) => s.ctx.components.catalog.get(t)?.pluggable)).toEqual([]);
  });

  it('a socket whose reflection lists nothing known registers nothing; the sidecar stays up', async () => {
    dirs = tempDirs();
    // serves only reflection itself: no component service
    servers.push(await startTestServer(join(dirs.sockets, 'other.sock'), {}, []));
    const s = await start();
    expect(s.ctx.components.catalog.list().filter((t) => t.endsWith('.other'))).toEqual([]);
    expect((await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/healthz`)).status).toBe(204);
  });

  it('a component naming such a socket fails with the services the socket serves (ignoreErrors keeps the sidecar up)', async () => {
    dirs = tempDirs();
    servers.push(await startTestServer(join(dirs.sockets, 'other.sock'), {}, []));
    writeComponents(dirs.resources, [{ name: 'st', type: 'state.other', initTimeout: '1s' }]);
    await expect(start()).rejects.toThrow(/other\.sock does not serve the state API .*it serves: no services/);
    writeComponents(dirs.resources, [{ name: 'st', type: 'state.other', initTimeout: '1s', ignoreErrors: true }]);
    const s = await start();
    expect(s.ctx.components.get('st')).toBeUndefined();
  });

  it('a component whose Init fails stops the start with its message (ignoreErrors keeps the sidecar up); no Features is no features', async () => {
    dirs = tempDirs();
    servers.push(
      await startTestServer(join(dirs.sockets, 'picky.sock'), {
        StateStore: {
          Init: (c: grpc.ServerUnaryCall<{ metadata: { properties: Record<string, string> } }, unknown>, cb: grpc.sendUnaryData<unknown>) =>
            c.request.metadata.properties.host ? cb(null, {}) : cb({ code: 3, details: 'metadata "host" is required' }),
          Ping: ok({}),
        },
      }),
    );
    writeComponents(dirs.resources, [{ name: 'st', type: 'state.picky' }]);
    await expect(start()).rejects.toThrow(/component "st" .*failed Init: INVALID_ARGUMENT: metadata "host" is required/);
    writeComponents(dirs.resources, [
      { name: 'st', type: 'state.picky', ignoreErrors: true },
      { name: 'good', type: 'state.picky', metadata: { host: 'h' } },
    ]);
    const s = await start();
    expect(s.ctx.components.get('st')).toBeUndefined();
    expect(s.ctx.components.stateStore('good')?.features()).toEqual([]);
  });

  it('a missing socket: waits up to initTimeout, then fails naming the socket and saying to start the component first', async () => {
    dirs = tempDirs();
    writeComponents(dirs.resources, [{ name: 'late', type: 'state.nowhere', initTimeout: '1s' }]);
    const t0 = Date.now();
    const err = await start().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toContain(join(dirs.sockets, 'nowhere.sock'));
    expect(err?.message).toMatch(/must be started before the runtime/);
    expect(err?.message).toMatch(/not a built-in type either/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(700);
  });

  it('a socket that appears within initTimeout is used', async () => {
    dirs = tempDirs();
    writeComponents(dirs.resources, [{ name: 'late', type: 'state.slow', initTimeout: '5s' }]);
    const inits: { instance: string; properties: Record<string, string> }[] = [];
    const later = new Promise<void>((r) => setTimeout(r, 400)).then(() => stateServer(join(dirs.sockets, 'slow.sock'), inits));
    const s = await start();
    await later;
    expect(inits.map((i) => i.instance)).toEqual(['late']);
    expect(s.ctx.components.stateStore('late')).toBeDefined();
  });

  it('a component not scoped to this app is never initialised', async () => {
    dirs = tempDirs();
    const inits = await stateServer(join(dirs.sockets, 'scoped.sock'));
    writeComponents(dirs.resources, [
      { name: 'mine', type: 'state.scoped', scopes: ['app-a'] },
      { name: 'theirs', type: 'state.scoped', scopes: ['app-b'] },
      // not scoped to us and its socket does not exist: no wait, no failure
      { name: 'ghost', type: 'state.ghost', scopes: ['app-b'], initTimeout: '30s' },
    ]);
    const t0 = Date.now();
    const s = await start('app-a');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(inits.map((i) => i.instance)).toEqual(['mine']);
    expect(s.ctx.components.get('theirs')).toBeUndefined();
    expect(s.ctx.components.get('ghost')).toBeUndefined();
  });
});
