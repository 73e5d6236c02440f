/**
 * The state API routed to pluggable state stores: a round trip through the example component,
 * and components that fail — answer errors, die mid-request, come back.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ETAG_INVALID_REASON, statusDetails } from '../../sidecar/src/pluggable/errors.ts';
import type { PluggableStateStore } from '../../sidecar/src/pluggable/state.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { json, ok, sidecarFor, startExample, startTestServer, tempDirs, useExampleSidecar, writeComponents, type TempDirs } from './helpers.ts';

async function waitFor(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('state API over the example pluggable component', () => {
  const env = useExampleSidecar([{ name: 'store', type: 'state.memstore' }], 'state-app');
  let base: string;
  beforeAll(() => {
    base = `${env.base}/v1.0/state/store`;
  });

  it('POST then GET round-trips values, with etags', async () => {
    const save = await fetch(base, json([{ key: 'order-1', value: { qty: 3, item: 'ü' }, metadata: {} }, { key: 'n', value: 42 }]));
    expect(save.status).toBe(204);
    const got = await fetch(`${base}/order-1`);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual({ qty: 3, item: 'ü' });
    expect(got.headers.get('etag')).toMatch(/^\d+$/);
    expect(await (await fetch(`${base}/n`)).json()).toBe(42);
    expect((await fetch(`${base}/absent`)).status).toBe(204);
  });

  it('etag errors of the component become the state API answers: stale → 409, malformed → 400', async () => {
    await fetch(base, json([{ key: 'e', value: 1 }]));
    const etag = (await fetch(`${base}/e`)).headers.get('etag')!;
    expect((await fetch(base, json([{ key: 'e', value: 2, etag }]))).status).toBe(204);
    const stale = await fetch(base, json([{ key: 'e', value: 3, etag }]));
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as { errorCode: string }).errorCode).toBe('ERR_STATE_SAVE');
    const bad = await fetch(base, json([{ key: 'e', value: 3, etag: 'not-a-number' }]));
    expect(bad.status).toBe(400);
    expect(await (await fetch(`${base}/e`)).json()).toBe(2);
  });

  it('a value the component refuses (bad ttlInSeconds) is a 400 and stores nothing', async () => {
    const res = await fetch(base, json([{ key: 'ttl', value: 1, metadata: { ttlInSeconds: 'soon' } }]));
    expect(res.status).toBe(400);
    expect((await fetch(`${base}/ttl`)).status).toBe(204);
  });

  it('transactions go to TransactionalStateStore', async () => {
    await fetch(base, json([{ key: 'tx-old', value: 'old' }]));
    const res = await fetch(`${base}/transaction`, json({
      operations: [
        { operation: 'upsert', request: { key: 'tx-new', value: 'new' } },
        { operation: 'delete', request: { key: 'tx-old' } },
      ],
    }));
    expect(res.status).toBe(204);
    expect(await (await fetch(`${base}/tx-new`)).json()).toBe('new');
    expect((await fetch(`${base}/tx-old`)).status).toBe(204);
  });

  it('a component process that dies is reported unhealthy, and used again once restarted', async () => {
    const store = env.sidecar.ctx.components.stateStore('store') as PluggableStateStore;
    const outbound = `${env.base}/v1.0/healthz/outbound`;
    expect((await fetch(outbound)).status).toBe(204);
    env.example.proc.kill('SIGKILL');
    await waitFor(() => !store.isHealthy());
    // the outbound health check names the component that does not answer
    const sick = await fetch(outbound);
    expect(sick.status).toBe(500);
    expect(await sick.json()).toMatchObject({ errorCode: 'ERR_HEALTH_NOT_READY', details: [expect.objectContaining({ name: 'store' })] });
    expect((await fetch(`${env.base}/v1.0/healthz`)).status).toBe(204);
    const down = await fetch(base, json([{ key: 'while-down', value: 1 }]));
    expect(down.status).toBe(500);
    expect(((await down.json()) as { message: string }).message).toContain('memstore.sock');
    env.example = await startExample(env.dirs.sockets, 'memstore');
    await waitFor(() => store.isHealthy(), 15_000);
    expect((await fetch(outbound)).status).toBe(204);
    expect((await fetch(base, json([{ key: 'after', value: 'back' }]))).status).toBe(204);
    expect(await (await fetch(`${base}/after`)).json()).toBe('back');
  }, 30_000);

  it('metadata shows the type, version and capabilities', async () => {
    const md = (await (await fetch(`${env.base}/v1.0/metadata`)).json()) as { components: unknown[] };
    expect(md.components).toContainEqual({ name: 'store', type: 'state.memstore', version: 'v1', capabilities: ['ETAG', 'TRANSACTIONAL', 'QUERY_API'] });
  });
});

describe('pluggable state stores that fail', () => {
  let dirs: TempDirs;
  let sidecar: Sidecar | undefined;
  const servers: grpc.Server[] = [];

  afterEach(async () => {
    await sidecar?.close();
    sidecar = undefined;
    for (const s of servers.splice(0)) s.forceShutdown();
    dirs?.cleanup();
  });

  type Handlers = Record<string, grpc.handleUnaryCall<any, any>>;
  async function serve(name: string, handlers: Handlers, extra: Record<string, grpc.UntypedServiceImplementation> = {}) {
    const counts = { init: 0 };
    const server = await startTestServer(join(dirs.sockets, `${name}.sock`), {
      StateStore: {
        Init: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => {
          counts.init++;
          cb(null, {});
        },
        Features: ok({ features: ['ETAG'] }),
        Ping: ok({}),
        ...handlers,
      },
      ...extra,
    });
    servers.push(server);
    return { server, counts };
  }

  async function startWith(name: string) {
    writeComponents(dirs.resources, [{ name: 'bad', type: `state.${name}` }]);
    sidecar = await sidecarFor(dirs);
    return `http://127.0.0.1:${sidecar.httpPort}/v1.0/state/bad`;
  }

  it('errors the component answers reach the caller with its message; the sidecar stays up', async () => {
    dirs = tempDirs();
    await serve('err', {
      Get: (_c, cb) => cb({ code: grpc.status.INTERNAL, details: 'disk on fire' }),
      Set: (c, cb) =>
        c.request.key.endsWith('abort')
          ? cb({ code: grpc.status.ABORTED, details: 'someone else wrote it' })
          : cb({ code: grpc.status.INVALID_ARGUMENT, details: 'etag is garbage', metadata: statusDetails(grpc.status.INVALID_ARGUMENT, 'etag is garbage', { reason: ETAG_INVALID_REASON, domain: 'test', metadata: {} }) }),
      Delete: (_c, cb) => cb({ code: grpc.status.INVALID_ARGUMENT, details: 'key too long' }),
    });
    const base = await startWith('err');
    const get = await fetch(`${base}/k`);
    expect(get.status).toBe(500);
    const body = (await get.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_STATE_GET');
    expect(body.message).toContain('disk on fire');
    expect((await fetch(base, json([{ key: 'abort', value: 1, etag: '1' }]))).status).toBe(409);
    // the ErrorInfo reason decides, even though the request carried no etag
    expect((await fetch(base, json([{ key: 'x', value: 1 }]))).status).toBe(400);
    // INVALID_ARGUMENT without an etag involved is a refused request, not an etag error
    const del = await fetch(`${base}/k`, { method: 'DELETE' });
    expect(del.status).toBe(400);
    expect(((await del.json()) as { message: string }).message).toContain('key too long');
    // concurrent reads of a store without BulkGet: each still gets the component's own error
    const many = await Promise.all(Array.from({ length: 10 }, (_, i) => fetch(`${base}/k${i}`)));
    for (const r of many) {
      expect(r.status).toBe(500);
      expect(((await r.json()) as { message: string }).message).toContain('disk on fire');
    }
    expect((await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/healthz`)).status).toBe(204);
  });

  it('a socket that closes mid-request: the request fails clearly, the component is unhealthy, then reconnected and re-initialised', async () => {
    dirs = tempDirs();
    let release: (() => void) | undefined;
    const first = await serve('flaky', {
      // never answers: the test kills the server while the call is in flight
      Get: () => {
        release?.();
      },
    });
    const base = await startWith('flaky');
    const inFlight = new Promise<void>((r) => (release = r));
    const pending = fetch(`${base}/k`);
    await inFlight;
    first.server.forceShutdown();
    const res = await pending;
    expect(res.status).toBe(500);
    expect(((await res.json()) as { message: string }).message).toMatch(/unavailable|unhealthy/i);
    const store = sidecar!.ctx.components.stateStore('bad') as PluggableStateStore;
    await expect(store.ping()).rejects.toThrow(/flaky\.sock/);
    expect(store.isHealthy()).toBe(false);

    // the component comes back on the same socket: rt reconnects and sends Init again
    const second = await serve('flaky', { Get: ok({ data: Buffer.from('"back"'), etag: { value: '7' } }) });
    let healthy = false;
    for (let i = 0; i < 50 && !healthy; i++) {
      healthy = await store.ping().then(() => true, () => false);
      if (!healthy) await new Promise((r) => setTimeout(r, 100));
    }
    expect(healthy).toBe(true);
    expect(second.counts.init).toBe(1);
    const again = await fetch(`${base}/k`);
    expect(again.status).toBe(200);
    expect(await again.json()).toBe('back');
  });

  it('a store without a bulk get of its own (got=false) is read key by key; TRANSACTIONAL needs its service', async () => {
    dirs = tempDirs();
    await serve('plain', {
      Features: ok({ features: ['ETAG', 'TRANSACTIONAL'] }),
      BulkGet: ok({ items: [], got: false }),
      Get: (c, cb) => cb(null, { data: Buffer.from(JSON.stringify(c.request.key)), etag: { value: '1' } }),
    });
    const base = await startWith('plain');
    const store = sidecar!.ctx.components.stateStore('bad')!;
    expect(store.features()).toEqual(['ETAG']);
    expect(store.transact).toBeUndefined();
    const got = await store.bulkGet(['a', 'b']);
    expect(got.map((g) => Buffer.from(g!.value).toString())).toEqual(['"a"', '"b"']);
    const tx = await fetch(`${base}/transaction`, json({ operations: [{ operation: 'upsert', request: { key: 'a', value: 1 } }] }));
    expect(tx.status).toBe(400);
  });

  it('TRANSACTIONAL also needs the claim: a store that serves TransactionalStateStore without it (the Go SDK serves it for every store) takes no transactions', async () => {
    dirs = tempDirs();
    let transacted = 0;
    await serve('plain', {
      Features: ok({ features: ['ETAG'] }),
      Get: ok({}),
    }, {
      TransactionalStateStore: {
        Transact: (_c: unknown, cb: (e: Error | null, r?: unknown) => void) => {
          transacted++;
          cb(null, {});
        },
      },
    });
    const base = await startWith('plain');
    const store = sidecar!.ctx.components.stateStore('bad')!;
    expect(store.features()).toEqual(['ETAG']);
    expect(store.transact).toBeUndefined();
    const tx = await fetch(`${base}/transaction`, json({ operations: [{ operation: 'upsert', request: { key: 'a', value: 1 } }] }));
    expect(tx.status).toBe(400);
    expect(transacted).toBe(0);
  });
});
