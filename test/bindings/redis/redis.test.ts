/**
 * bindings.redis through a real sidecar against a real Redis: each operation over HTTP
 * (POST /v1.0/bindings/<name>) and through the @dapr/dapr SDK over gRPC, TTLs as Redis keeps
 * them, and request mistakes answered 400 with the error shape.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../services/ci.ts';
import { redisMetadata, redisTarget } from '../../services/redis.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../../grpc/harness.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);
const run = `rb-${process.pid}-${Date.now()}`;

describe.skipIf(!available)('bindings.redis against a real Redis', () => {
  let s: RuntimeSidecar;
  let redis: Redis;
  let base: string;

  beforeAll(async () => {
    s = await startRuntimeSidecar({ extraComponents: [componentYaml('cache', 'bindings.redis', redisMetadata(target))] });
    base = `http://127.0.0.1:${s.sidecar.httpPort}/v1.0/bindings/cache`;
    redis = new Redis(target.url);
  });
  afterAll(async () => {
    if (redis) {
      const keys = await redis.keys(`${run}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
    await s?.stop();
  });

  const invoke = (operation: string, metadata: Record<string, string>, data?: unknown) =>
    fetch(base, { method: 'POST', body: JSON.stringify({ operation, metadata, ...(data === undefined ? {} : { data }) }) });

  it('create, get, delete: JSON data stored as its JSON text, a string as is', async () => {
    const key = `${run}-json`;
    expect((await invoke('create', { key }, { hello: 'world' })).status).toBe(204);
    expect(await redis.get(key)).toBe('{"hello":"world"}');
    expect(await redis.pttl(key)).toBe(-1);
    const got = await invoke('get', { key });
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual({ hello: 'world' });

    expect((await invoke('create', { key }, 'plain text')).status).toBe(204);
    expect(await redis.get(key)).toBe('plain text');

    expect((await invoke('delete', { key })).status).toBe(204);
    expect(await redis.exists(key)).toBe(0);
    // absent: no content; deleting again is fine
    expect((await invoke('get', { key })).status).toBe(204);
    expect((await invoke('delete', { key })).status).toBe(204);
  });

  it('get with delete: "true" takes the value out (GETDEL)', async () => {
    const key = `${run}-getdel`;
    await redis.set(key, 'once');
    const got = await invoke('get', { key, delete: 'true' });
    expect(await got.text()).toBe('once');
    expect(await redis.exists(key)).toBe(0);
  });

  it('create with ttlInSeconds sets the expiry in the same write; a create without one clears it', async () => {
    const key = `${run}-ttl`;
    expect((await invoke('create', { key, ttlInSeconds: '100' }, 'v')).status).toBe(204);
    const ttl = await redis.ttl(key);
    expect(ttl).toBeGreaterThan(95);
    expect(ttl).toBeLessThanOrEqual(100);
    await invoke('create', { key }, 'v2');
    expect(await redis.ttl(key)).toBe(-1);
    // and it does expire
    await invoke('create', { key, ttlInSeconds: '1' }, 'short');
    const deadline = Date.now() + 5000;
    while ((await redis.exists(key)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect((await invoke('get', { key })).status).toBe(204);
  });

  it('increment counts up from nothing, with an optional ttlInSeconds', async () => {
    const key = `${run}-count`;
    for (let i = 0; i < 3; i++) expect((await invoke('increment', { key })).status).toBe(204);
    expect(await redis.get(key)).toBe('3');
    expect(await redis.ttl(key)).toBe(-1);
    await invoke('increment', { key, ttlInSeconds: '60' });
    expect(await redis.get(key)).toBe('4');
    expect(await redis.ttl(key)).toBeGreaterThan(55);
  });

  it('expire sets or removes the expiry of a key', async () => {
    const key = `${run}-exp`;
    await redis.set(key, 'v');
    expect((await invoke('expire', { key, ttlInSeconds: '50' })).status).toBe(204);
    expect(await redis.ttl(key)).toBeGreaterThan(45);
    expect((await invoke('expire', { key, ttlInSeconds: '-1' })).status).toBe(204);
    expect(await redis.ttl(key)).toBe(-1);
  });

  it('request mistakes are 400 with the error shape, naming what to fix; nothing is written', async () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      ['create', {}, /metadata "key" is required/],
      ['get', { key: '' }, /metadata "key" is required/],
      ['create', { key: `${run}-bad`, ttlInSeconds: 'soon' }, /ttlInSeconds.*whole number/],
      ['increment', { key: `${run}-bad`, ttlInSeconds: '-7' }, /ttlInSeconds.*from -1/],
      ['expire', { key: `${run}-bad` }, /ttlInSeconds" is required/],
    ];
    for (const [op, md, message] of cases) {
      const r = await invoke(op, md, 'x');
      expect(r.status, `${op} ${JSON.stringify(md)}`).toBe(400);
      const body = (await r.json()) as { errorCode: string; message: string };
      expect(body.errorCode).toBe('ERR_MALFORMED_REQUEST');
      expect(body.message).toMatch(message);
    }
    expect(await redis.exists(`${run}-bad`)).toBe(0);
    const unknown = await invoke('list', { key: 'k' });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { message: string }).message).toContain('supported: create, get, delete, increment, expire');
  });

  it('the @dapr/dapr SDK over gRPC: create, get, increment, delete', async () => {
    const c = s.sdk();
    const key = `${run}-sdk`;
    await c.binding.send('cache', 'create', { n: 1 }, { key });
    expect(await redis.get(key)).toBe('{"n":1}');
    // the SDK's gRPC client hands back the whole response: the value is its data bytes
    const got = (await c.binding.send('cache', 'get', undefined, { key })) as { data: Uint8Array };
    expect(Buffer.from(got.data).toString()).toBe('{"n":1}');
    await c.binding.send('cache', 'delete', undefined, { key });
    await c.binding.send('cache', 'increment', undefined, { key });
    expect(await redis.get(key)).toBe('1');
  });
});
