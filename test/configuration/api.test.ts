/**
 * The configuration API of a real sidecar over configuration.redis and configuration.postgresql
 * (real Redis and PostgreSQL), as the reference runtime serves it: HTTP get / subscribe /
 * unsubscribe under /v1.0 and /v1.0-alpha1 with changes POSTed to a real app, the gRPC methods
 * (a raw client and the @dapr/dapr SDK), unknown stores, and any query string answered 2xx or a
 * 400 JSON error, never a 5xx.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';
import { startApp, type TestApp } from '../pubsub/helpers.ts';
import { requireService } from '../services/ci.ts';
import { postgresTarget } from '../services/postgres.ts';
import { redisTarget } from '../services/redis.ts';
import { configTable, configurationRedisMetadata, eventually, redisClient, type ConfigTable } from './helpers.ts';

const redis = await redisTarget();
const pg = await postgresTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url} (set RT_TEST_REDIS_URL)`);
const havePg = requireService('PostgreSQL', pg.available, `nothing answers at ${pg.host}:${pg.port} (set RT_TEST_POSTGRES_URL)`);

const md = configurationRedisMetadata(redis);
const prefix = `cfgapi-${process.pid}-${Date.now() % 100000}`;

let s: RuntimeSidecar;
let app: TestApp;
let base: string;
let r: Awaited<ReturnType<typeof redisClient>>;
let t: ConfigTable;

beforeAll(async () => {
  if (!haveRedis || !havePg) return;
  app = await startApp();
  t = await configTable(pg);
  r = await redisClient(redis, Number(md.redisDB));
  s = await startRuntimeSidecar({
    appPort: app.port,
    extraComponents: [
      componentYaml('rcfg', 'configuration.redis', md),
      componentYaml('pcfg', 'configuration.postgresql', { connectionString: pg.url, table: t.table }),
      componentYaml('pcfg-ch', 'configuration.postgresql', { connectionString: pg.url, table: t.table, notifyChannel: t.channel }),
    ],
  });
  base = `http://127.0.0.1:${s.sidecar.httpPort}`;
}, 60_000);

afterAll(async () => {
  await s?.stop();
  await app?.close();
  if (r) {
    const keys = await r.keys(`${prefix}*`);
    if (keys.length) await r.del(...keys);
    r.disconnect();
  }
  await t?.drop();
});

const json = async (path: string) => {
  const res = await fetch(base + path);
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
};

/** The deliveries the app got for one key, as the items' values. */
const valuesFor = (store: string, key: string) =>
  app.deliveries.filter((d) => d.path === `/configuration/${store}/${encodeURIComponent(key)}`).map((d) => (d.body.items as Record<string, { value?: string }>)[key]?.value ?? '');

describe.runIf(haveRedis && havePg)('configuration over HTTP', () => {
  it('get: the keys asked for (v1.0 and v1.0-alpha1), every key without one, 204 when none has an item', async () => {
    await r.mset(`${prefix}-a`, 'one||1', `${prefix}-b`, 'two||2');
    for (const v of ['v1.0', 'v1.0-alpha1']) {
      const got = await json(`/${v}/configuration/rcfg?key=${prefix}-a&key=${prefix}-b&key=${prefix}-none`);
      expect(got).toEqual({ status: 200, body: { [`${prefix}-a`]: { value: 'one', version: '1' }, [`${prefix}-b`]: { value: 'two', version: '2' } } });
    }
    const all = await json('/v1.0/configuration/rcfg');
    expect(all.body?.[`${prefix}-a`]).toEqual({ value: 'one', version: '1' });
    expect((await fetch(`${base}/v1.0/configuration/rcfg?key=${prefix}-none`)).status).toBe(204);
    await t.set('pa', 'pv', '3', { team: 'x' });
    expect(await json('/v1.0/configuration/pcfg?key=pa')).toEqual({ status: 200, body: { pa: { value: 'pv', version: '3', metadata: { team: 'x' } } } });
  });

  it('subscribe (Redis): changes reach the app as POST /configuration/<store>/<key> with {id, items}; unsubscribe stops them', async () => {
    const key = `${prefix}-sub/1`;
    const sub = await json(`/v1.0/configuration/rcfg/subscribe?key=${encodeURIComponent(key)}`);
    expect(sub.status).toBe(200);
    const id = sub.body!.id as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await r.set(key, 'first||1');
    await app.waitFor(() => valuesFor('rcfg', key).includes('first'));
    const d = app.deliveries.find((x) => x.path === `/configuration/rcfg/${encodeURIComponent(key)}`)!;
    expect(d.body).toEqual({ id, items: { [key]: { value: 'first', version: '1' } } });
    expect(d.headers['content-type']).toMatch(/application\/json/);
    // a marker key of a second subscription: the store's one subscriber connection gets the
    // notifications in the order of the writes, so a delivery of 'after' would come before the marker's
    const marker = `${prefix}-sub/marker`;
    const markerSub = await json(`/v1.0/configuration/rcfg/subscribe?key=${encodeURIComponent(marker)}`);
    expect(await json(`/v1.0-alpha1/configuration/rcfg/${id}/unsubscribe`)).toEqual({ status: 200, body: { ok: true } });
    await r.set(key, 'after||2');
    await r.set(marker, 'm||1');
    await app.waitFor(() => valuesFor('rcfg', marker).includes('m'));
    expect((await json(`/v1.0/configuration/rcfg/${markerSub.body!.id as string}/unsubscribe`)).status).toBe(200);
    expect(valuesFor('rcfg', key)).not.toContain('after');
    const again = await json(`/v1.0/configuration/rcfg/${id}/unsubscribe`);
    expect(again.status).toBe(404);
    expect(again.body?.errorCode).toBe('ERR_CONFIGURATION_UNSUBSCRIBE');
  });

  it('subscribe (PostgreSQL): the channel from the request metadata or the component; without one, 400 ERR_CONFIGURATION_SUBSCRIBE', async () => {
    const none = await json('/v1.0/configuration/pcfg/subscribe?key=k');
    expect(none.status).toBe(400);
    expect(none.body?.errorCode).toBe('ERR_CONFIGURATION_SUBSCRIBE');
    expect(none.body?.message).toMatch(/pgNotifyChannel/);
    const a = await json(`/v1.0/configuration/pcfg/subscribe?key=ps&metadata.pgNotifyChannel=${t.channel}`);
    const b = await json('/v1.0/configuration/pcfg-ch/subscribe');
    expect([a.status, b.status]).toEqual([200, 200]);
    for (const v of ['x', 'y', 'z']) await t.set('ps', v, v);
    await app.waitFor(() => valuesFor('pcfg', 'ps').join() === 'x,y,z' && valuesFor('pcfg-ch', 'ps').join() === 'x,y,z');
    for (const [store, sub] of [['pcfg', a], ['pcfg-ch', b]] as const) expect((await json(`/v1.0/configuration/${store}/${sub.body!.id as string}/unsubscribe`)).status).toBe(200);
  });

  it('an unknown store is 400 ERR_CONFIGURATION_STORE_NOT_FOUND naming the loaded ones; an id of another store 404', async () => {
    for (const path of ['/v1.0/configuration/nope', '/v1.0/configuration/nope/subscribe', '/v1.0-alpha1/configuration/nope/some-id/unsubscribe']) {
      const res = await json(path);
      expect(res.status, path).toBe(400);
      expect(res.body?.errorCode).toBe('ERR_CONFIGURATION_STORE_NOT_FOUND');
      expect(res.body?.message).toContain('pcfg, pcfg-ch, rcfg');
    }
    const sub = await json('/v1.0/configuration/rcfg/subscribe?key=x');
    expect((await json(`/v1.0/configuration/pcfg/${sub.body!.id as string}/unsubscribe`)).status).toBe(404);
    expect((await json(`/v1.0/configuration/rcfg/${sub.body!.id as string}/unsubscribe`)).status).toBe(200);
  });

  it('an HTTP subscription on a sidecar without an app is 500 ERR_APP_CHANNEL_NIL (as there); a wrong store is still 400', async () => {
    const noApp = await startRuntimeSidecar({ extraComponents: [componentYaml('rcfg', 'configuration.redis', md)] });
    try {
      const at = (path: string) => fetch(`http://127.0.0.1:${noApp.sidecar.httpPort}${path}`).then(async (res) => ({ status: res.status, body: (await res.json()) as { errorCode: string } }));
      const refused = await at('/v1.0/configuration/rcfg/subscribe?key=a');
      expect([refused.status, refused.body.errorCode]).toEqual([500, 'ERR_APP_CHANNEL_NIL']);
      const unknown = await at('/v1.0/configuration/nope/subscribe');
      expect([unknown.status, unknown.body.errorCode]).toEqual([400, 'ERR_CONFIGURATION_STORE_NOT_FOUND']);
      expect(noApp.sidecar.ctx.services.configuration!.ids()).toEqual([]);
    } finally {
      await noApp.stop();
    }
  });

  it('property: any query string on get and subscribe is answered 200/204 or a 400 JSON error, never a 5xx', async () => {
    const part = fc.oneof(fc.constantFrom('key', 'metadata.x', 'metadata.', 'key[]', '%00', '%ZZ', '__proto__', 'metadata.__proto__'), fc.string({ maxLength: 12 }));
    const qs = fc.array(fc.tuple(part, fc.oneof(fc.constant(''), fc.string({ maxLength: 12 }), fc.constantFrom('%', '%E0%A4%A', '&&', '='))), { maxLength: 6 });
    const subs: string[] = [];
    await fc.assert(
      fc.asyncProperty(qs, fc.boolean(), async (pairs, subscribe) => {
        const query = pairs.map(([k, v]) => `${encodeURI(k)}=${v}`).join('&');
        const res = await fetch(`${base}/v1.0/configuration/rcfg${subscribe ? '/subscribe' : ''}?${query}`);
        expect([200, 204, 400], `${res.status} for ?${query}`).toContain(res.status);
        if (res.status === 400) expect(((await res.json()) as { errorCode: string }).errorCode).toMatch(/^ERR_/);
        else if (res.status === 200 && subscribe) subs.push(((await res.json()) as { id: string }).id);
        else await res.arrayBuffer();
      }),
      { numRuns: 150 },
    );
    for (const id of subs) await json(`/v1.0/configuration/rcfg/${id}/unsubscribe`);
    const empty = await json('/v1.0/configuration/rcfg?key=');
    expect(empty.status).toBe(400);
    expect(empty.body?.errorCode).toBe('ERR_MALFORMED_REQUEST');
  });
});

interface StreamMsg {
  id: string;
  items: Record<string, { value: string; version: string; metadata: Record<string, string> }>;
}

/** A raw SubscribeConfiguration(Alpha1) stream, recording its messages. */
function openStream(method: string, req: unknown) {
  const call = (s.client as unknown as Record<string, (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<StreamMsg>>)[method].call(s.client, req, new grpc.Metadata());
  const messages: StreamMsg[] = [];
  let ended = false;
  let error: grpc.ServiceError | undefined;
  call.on('data', (m: StreamMsg) => messages.push(m));
  call.on('error', (e: grpc.ServiceError) => (error = e));
  call.on('end', () => (ended = true));
  return { call, messages, ended: () => ended, error: () => error };
}

describe.runIf(haveRedis && havePg)('configuration over gRPC', () => {
  it('GetConfiguration(Alpha1): the items; an unknown store INVALID_ARGUMENT with ERR_CONFIGURATION_STORE_NOT_FOUND', async () => {
    await r.set(`${prefix}-g`, 'gv||9');
    for (const m of ['GetConfiguration', 'GetConfigurationAlpha1']) {
      const res = await s.call<{ items: Record<string, unknown> }>(m, { store_name: 'rcfg', keys: [`${prefix}-g`] });
      expect(res.items).toEqual({ [`${prefix}-g`]: { value: 'gv', version: '9', metadata: {} } });
    }
    const e = await s.fail('GetConfiguration', { store_name: 'nope', keys: [] });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.metadata.get('rt-error-code')).toEqual(['ERR_CONFIGURATION_STORE_NOT_FOUND']);
  });

  it('SubscribeConfiguration(Alpha1): first the id alone, then each change; UnsubscribeConfiguration completes the stream; an unknown id is ok: false', async () => {
    for (const m of ['SubscribeConfiguration', 'SubscribeConfigurationAlpha1']) {
      const key = `${prefix}-${m}`;
      const st = openStream(m, { store_name: 'rcfg', keys: [key] });
      await eventually(() => st.messages.length === 1, 'the id message');
      const id = st.messages[0].id;
      expect(st.messages[0].items).toEqual({});
      await r.set(key, 'g1||1');
      await r.set(key, 'g2||2');
      await eventually(() => st.messages.at(-1)?.items[key]?.value === 'g2', 'the changes');
      expect(st.messages.slice(1).every((x) => x.id === id)).toBe(true);
      const un = await s.call<{ ok: boolean }>(m.replace('Subscribe', 'Unsubscribe'), { store_name: 'rcfg', id });
      expect(un.ok).toBe(true);
      await eventually(() => st.ended(), 'the stream to complete');
      expect(st.error()).toBeUndefined();
    }
    const unknown = await s.call<{ ok: boolean; message: string }>('UnsubscribeConfiguration', { store_name: 'rcfg', id: 'nope' });
    expect(unknown.ok).toBe(false);
    expect(unknown.message).toMatch(/does not exist/);
  });

  it('a cancelled stream ends its subscription; a refused one is an error status', async () => {
    const st = openStream('SubscribeConfiguration', { store_name: 'pcfg-ch', keys: [] });
    await eventually(() => st.messages.length === 1, 'the id message');
    const svc = s.sidecar.ctx.services.configuration!;
    expect(svc.ids()).toContain(st.messages[0].id);
    st.call.cancel();
    await eventually(() => !svc.ids().includes(st.messages[0].id), 'the subscription to end');
    const bad = openStream('SubscribeConfiguration', { store_name: 'pcfg', keys: [] });
    await eventually(() => bad.error() !== undefined, 'the refusal');
    expect(bad.error()!.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(bad.error()!.metadata.get('rt-error-code')).toEqual(['ERR_CONFIGURATION_SUBSCRIBE']);
    const unknown = openStream('SubscribeConfiguration', { store_name: 'nope', keys: [] });
    await eventually(() => unknown.error() !== undefined, 'the refusal');
    expect(unknown.error()!.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('the @dapr/dapr SDK over gRPC: get, subscribeWithKeys and stop', async () => {
    const sdk = s.sdk();
    const key = `${prefix}-sdk`;
    await r.set(key, 's0||0');
    const got = await sdk.configuration.get('rcfg', [key]);
    expect(got.items[key]).toMatchObject({ key, value: 's0', version: '0' });
    const svc = s.sidecar.ctx.services.configuration!;
    const before = new Set(svc.ids());
    const seen: string[] = [];
    const sub = await sdk.configuration.subscribeWithKeys('rcfg', [key], (res) => {
      seen.push(res.items[key]?.value ?? '');
      return Promise.resolve();
    });
    // the SDK returns before its stream is open: wait for the subscription
    await eventually(() => svc.ids().some((id) => !before.has(id)), 'the SDK subscription');
    const id = svc.ids().find((x) => !before.has(x))!;
    await r.set(key, 's1||1');
    await eventually(() => seen.includes('s1'), 'the SDK callback');
    await sub.stop();
    await eventually(() => !svc.ids().includes(id), 'the SDK subscription to end');
  });

  it('a replaced component (hot reload) ends its subscriptions: the stream completes; a new one listens on the new instance', async () => {
    const st = openStream('SubscribeConfiguration', { store_name: 'rcfg', keys: [`${prefix}-swap`] });
    await eventually(() => st.messages.length === 1, 'the id message');
    await writeFile(join(s.dir, 'resources', 'extra-0.yaml'), componentYaml('rcfg', 'configuration.redis', { ...md, enableTLS: 'false' }));
    await eventually(() => st.ended(), 'the stream to complete', 15_000);
    expect(st.error()).toBeUndefined();
    const again = openStream('SubscribeConfiguration', { store_name: 'rcfg', keys: [`${prefix}-swap`] });
    await eventually(() => again.messages.length === 1, 'the id message');
    await r.set(`${prefix}-swap`, 'new||1');
    await eventually(() => again.messages.at(-1)?.items[`${prefix}-swap`]?.value === 'new', 'the change');
    again.call.cancel();
  });
});
