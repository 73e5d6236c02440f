/**
 * configuration.redis and configuration.postgresql against a real Redis and PostgreSQL: get by
 * keys and of every key in the reference's formats, subscriptions (a key's own, every key,
 * deletions), and the delivery guarantee as a property over random sequences of writes per key:
 * - PostgreSQL (the notification carries its row): the subscriber's sequence of a key holds
 *   every write, in order;
 * - Redis (a keyspace notification names only the key, which is read again): the sequence is in
 *   order, holds only written values, and ends with the key's last write; every write is followed
 *   by a delivery of it or a later one.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factory as postgresFactory } from '../../sidecar/src/components/configuration/postgresql/index.ts';
import { factory as redisFactory } from '../../sidecar/src/components/configuration/redis/index.ts';
import { parseRedisItem, withNeededEvents } from '../../sidecar/src/components/configuration/redis/value.ts';
import { latestPerKey, notificationItem } from '../../sidecar/src/components/configuration/postgresql/items.ts';
import type { ConfigurationItems, ConfigurationStore } from '../../sidecar/src/components/configuration/types.ts';
import { requireService } from '../services/ci.ts';
import { postgresTarget } from '../services/postgres.ts';
import { redisTarget } from '../services/redis.ts';
import { componentContext, spec } from '../state/helpers.ts';
import { configTable, configurationRedisMetadata, eventually, redisClient, type ConfigTable } from './helpers.ts';

const redis = await redisTarget();
const pg = await postgresTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url} (set RT_TEST_REDIS_URL)`);
const havePg = requireService('PostgreSQL', pg.available, `nothing answers at ${pg.host}:${pg.port} (set RT_TEST_POSTGRES_URL)`);

/** Every delivery of a subscription, per key, as versions. */
function recorder() {
  const seen = new Map<string, { value: string; version: string }[]>();
  const onChange = async (items: ConfigurationItems) => {
    for (const [k, v] of Object.entries(items)) {
      const list = seen.get(k) ?? [];
      list.push({ value: v.value, version: v.version });
      seen.set(k, list);
    }
  };
  return { seen, onChange };
}

/** Random writes: per key a sequence of values; interleaved in a random order of keys. */
const writePlan = fc
  .array(fc.array(fc.string({ minLength: 1, maxLength: 8 }).filter((s) => !s.includes('|')), { minLength: 1, maxLength: 25 }), { minLength: 1, maxLength: 4 })
  .chain((perKey) => {
    const steps = perKey.flatMap((vals, k) => vals.map(() => k));
    return fc.tuple(fc.constant(perKey), fc.shuffledSubarray(steps, { minLength: steps.length, maxLength: steps.length }));
  });

describe('item formats', () => {
  it("Redis `value||version` is split as the reference splits it", () => {
    expect(parseRedisItem('101||1')).toEqual({ value: '101', version: '1', metadata: {} });
    expect(parseRedisItem('plain')).toEqual({ value: 'plain', version: '', metadata: {} });
    expect(parseRedisItem('a||b||c')).toEqual({ value: 'a', version: 'b', metadata: {} });
  });

  it('notify-keyspace-events: what is missing is added, what is there is kept', () => {
    expect(withNeededEvents('')).toBe('K$gxe');
    expect(withNeededEvents('Ex')).toBe('ExK$ge');
    expect(withNeededEvents('KEA')).toBeUndefined();
    expect(withNeededEvents('K$gxe')).toBeUndefined();
  });

  it('PostgreSQL rows: the highest numeric version per key wins; notifications read in any case', () => {
    const items = latestPerKey([
      { key: 'a', value: 'old', version: '2', metadata: null },
      { key: 'a', value: 'new', version: '10', metadata: { x: 1 } },
      { key: 'a', value: 'text', version: 'v9', metadata: null },
      { key: '__proto__', value: 'p', version: '1', metadata: '{"k":"v"}' },
    ]);
    expect(items.a).toEqual({ value: 'new', version: '10', metadata: { x: '1' } });
    expect(Object.keys(items)).toEqual(['a', '__proto__']);
    expect(items['__proto__']).toEqual({ value: 'p', version: '1', metadata: { k: 'v' } });
    expect(notificationItem('{"data":{"KEY":"k","Value":"v","version":"3","metadata":null}}')).toEqual({ key: 'k', item: { value: 'v', version: '3', metadata: {} } });
    expect(notificationItem('not json')).toBeUndefined();
    expect(notificationItem('{"data":{"value":"v"}}')).toBeUndefined();
  });
});

describe.skipIf(!haveRedis)('configuration.redis against a real Redis', () => {
  const md = configurationRedisMetadata(redis);
  const db = Number(md.redisDB);
  let store: ConfigurationStore;
  let c: Awaited<ReturnType<typeof redisClient>>;
  const prefix = `cfg-${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    store = redisFactory() as ConfigurationStore;
    await store.init(spec('configuration.redis', md), componentContext);
    c = await redisClient(redis, db);
  });
  afterAll(async () => {
    if (c) {
      const keys = await c.keys(`${prefix}*`);
      if (keys.length) await c.del(...keys);
      c.disconnect();
    }
    await store?.close();
  });

  it('gets the keys asked for, and every string key when none is; skips other types and empty values', async () => {
    await c.mset(`${prefix}-a`, '101||1', `${prefix}-b`, 'plain', `${prefix}-empty`, '||3');
    await c.hset(`${prefix}-hash`, 'f', 'v');
    expect(await store.get([`${prefix}-a`, `${prefix}-missing`, `${prefix}-hash`], {})).toEqual({ [`${prefix}-a`]: { value: '101', version: '1', metadata: {} } });
    const all = await store.get([], {});
    expect(all[`${prefix}-a`]).toEqual({ value: '101', version: '1', metadata: {} });
    expect(all[`${prefix}-b`]).toEqual({ value: 'plain', version: '', metadata: {} });
    expect(all[`${prefix}-empty`]).toBeUndefined();
    expect(all[`${prefix}-hash`]).toBeUndefined();
    await c.set('__proto__', 'p||1');
    try {
      const odd = await store.get(['__proto__'], {});
      expect(Object.keys(odd)).toEqual(['__proto__']);
      expect(Object.getPrototypeOf(odd)).toBe(Object.prototype);
    } finally {
      await c.del('__proto__');
    }
  });

  it('a subscription to keys sees their sets and deletions (empty item), not other keys; stop ends it', async () => {
    const r = recorder();
    const w = await store.subscribe({ keys: [`${prefix}-s1`], metadata: {} }, r.onChange);
    // a marker watched by a second subscription: the store's one subscriber connection gets
    // notifications in the order of the writes, so once the marker is seen a write before it was too
    const marker = recorder();
    const m = await store.subscribe({ keys: [`${prefix}-marker`], metadata: {} }, marker.onChange);
    await c.set(`${prefix}-s1`, 'x||1');
    await c.set(`${prefix}-other`, 'y||1');
    await eventually(() => (r.seen.get(`${prefix}-s1`)?.length ?? 0) >= 1, 'the set');
    await c.del(`${prefix}-s1`);
    await eventually(() => r.seen.get(`${prefix}-s1`)?.at(-1)?.value === '', 'the deletion');
    await w.stop();
    await c.set(`${prefix}-s1`, 'after||2');
    await c.set(`${prefix}-marker`, 'm||1');
    await eventually(() => marker.seen.has(`${prefix}-marker`), 'the marker');
    await m.stop();
    expect(r.seen.get(`${prefix}-s1`)?.map((x) => x.value)).toEqual(['x', '']);
    expect(r.seen.has(`${prefix}-other`)).toBe(false);
  });

  it('a subscription to every key sees any key, and expiry', async () => {
    const r = recorder();
    const w = await store.subscribe({ keys: [], metadata: {} }, r.onChange);
    try {
      await c.set(`${prefix}-any`, 'v||1', 'PX', 100);
      await eventually(() => r.seen.get(`${prefix}-any`)?.at(-1)?.value === '' && (r.seen.get(`${prefix}-any`)?.length ?? 0) >= 2, 'the set then the expiry', 5000);
      expect(r.seen.get(`${prefix}-any`)![0]).toEqual({ value: 'v', version: '1' });
    } finally {
      await w.stop();
    }
  });

  it('after a lost subscriber connection, the keys are read again: a change made while it was down arrives', async () => {
    const r = recorder();
    const w = await store.subscribe({ keys: [`${prefix}-lost`], metadata: {} }, r.onChange);
    try {
      const list = (await c.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
      const id = /id=(\d+) [^\n]*name=rt-configuration-test /.exec(list)?.[1];
      expect(id).toBeDefined();
      // in one transaction: the subscriber is dropped before the SET, so its notification never reaches it
      await c.multi().client('KILL', 'ID', id!).set(`${prefix}-lost`, 'while-down||7').exec();
      await eventually(() => r.seen.get(`${prefix}-lost`)?.at(-1)?.value === 'while-down', 'the change made while the connection was down');
    } finally {
      await w.stop();
    }
  });

  it('property: per key, deliveries are in order, only written values, ending with the last write', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(writePlan, fc.boolean(), async ([perKey, steps], allKeys) => {
        const keys = perKey.map((_, k) => `${prefix}-p${run}-${k}`);
        run++;
        const r = recorder();
        const w = await store.subscribe({ keys: allKeys ? [] : keys, metadata: {} }, r.onChange);
        try {
          const next = perKey.map(() => 0);
          // all writes at once (pipelined): faster than the store reads them back
          await Promise.all(
            steps.map((k) => {
              const i = next[k]++;
              return c.set(keys[k], `${perKey[k][i]}||${i}`);
            }),
          );
          await eventually(() => keys.every((key, k) => r.seen.get(key)?.at(-1)?.version === String(perKey[k].length - 1)), 'every key to reach its last write');
          for (const [k, key] of keys.entries()) {
            const got = r.seen.get(key)!;
            const versions = got.map((g) => Number(g.version));
            for (let j = 1; j < versions.length; j++) expect(versions[j]).toBeGreaterThanOrEqual(versions[j - 1]);
            for (const g of got) expect(g.value).toBe(perKey[k][Number(g.version)]);
          }
        } finally {
          await w.stop();
        }
      }),
      { numRuns: 15 },
    );
  });
});

describe.skipIf(!havePg)('configuration.postgresql against a real PostgreSQL', () => {
  let t: ConfigTable;
  let store: ConfigurationStore;
  beforeAll(async () => {
    t = await configTable(pg);
    store = postgresFactory() as ConfigurationStore;
    await store.init(spec('configuration.postgresql', { connectionString: pg.url, table: t.table }), componentContext);
  });
  afterAll(async () => {
    await store?.close();
    await t?.drop();
  });

  it('refuses to start without its table, naming it', async () => {
    const s = postgresFactory() as ConfigurationStore;
    await expect(s.init(spec('configuration.postgresql', { connectionString: pg.url, table: 'rt_cfg_nowhere' }), componentContext)).rejects.toThrow(/table "rt_cfg_nowhere" does not exist/);
    await s.close();
    await expect(s.init(spec('configuration.postgresql', { connectionString: pg.url }), componentContext)).rejects.toThrow(/"table" is required/);
  });

  it('gets the keys asked for, and every key when none is', async () => {
    await t.set('g1', 'one', '1', { region: 'eu' });
    await t.set('g2', 'two', '7');
    expect(await store.get(['g1', 'nope'], {})).toEqual({ g1: { value: 'one', version: '1', metadata: { region: 'eu' } } });
    const all = await store.get([], {});
    expect(all.g2).toEqual({ value: 'two', version: '7', metadata: {} });
  });

  it("a subscription needs a channel (the request's pgNotifyChannel here), and sees sets and deletions", async () => {
    await expect(store.subscribe({ keys: [], metadata: {} }, async () => undefined)).rejects.toThrow(/no notify channel/);
    await expect(store.subscribe({ keys: [], metadata: { pgNotifyChannel: 'Bad Name' } }, async () => undefined)).rejects.toThrow(/must be/);
    const r = recorder();
    const w = await store.subscribe({ keys: ['s1'], metadata: { pgNotifyChannel: t.channel } }, r.onChange);
    // a marker watched by a second subscription on the same channel: notifications come in commit
    // order, so once the marker is seen a write before it was too
    const marker = recorder();
    const m = await store.subscribe({ keys: ['s-marker'], metadata: { pgNotifyChannel: t.channel } }, marker.onChange);
    await t.set('s1', 'a', '1');
    await t.set('s-other', 'b', '1');
    await t.del('s1');
    await eventually(() => (r.seen.get('s1')?.length ?? 0) >= 2, 'the set and the deletion');
    await w.stop();
    await t.set('s1', 'after', '2');
    await t.set('s-marker', 'm', '1');
    await eventually(() => marker.seen.has('s-marker'), 'the marker');
    await m.stop();
    // a deletion's notification carries the deleted row, as the reference delivers it
    expect(r.seen.get('s1')).toEqual([
      { value: 'a', version: '1' },
      { value: 'a', version: '1' },
    ]);
    expect(r.seen.has('s-other')).toBe(false);
  });

  it('after a lost listening connection, each subscription gets its keys again', async () => {
    await t.set('lost', 'kept', '4');
    const r = recorder();
    const w = await store.subscribe({ keys: ['lost'], metadata: { pgNotifyChannel: t.channel } }, r.onChange);
    try {
      const killed = (await t.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN "${t.channel}"'`)) as { rowCount: number };
      expect(killed.rowCount).toBe(1);
      // nothing was written: only the read after the reconnect delivers it
      await eventually(() => r.seen.get('lost')?.at(-1)?.value === 'kept', 'the items read again');
      await t.set('lost', 'after', '5');
      await eventually(() => r.seen.get('lost')?.at(-1)?.value === 'after', 'a change after the reconnect');
    } finally {
      await w.stop();
    }
  });

  it('property: per key, the subscriber sees every write, in order', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(writePlan, fc.boolean(), async ([perKey, steps], allKeys) => {
        const keys = perKey.map((_, k) => `p${run}-${k}`);
        run++;
        const r = recorder();
        const w = await store.subscribe({ keys: allKeys ? [] : keys, metadata: { pgNotifyChannel: t.channel } }, r.onChange);
        try {
          const next = perKey.map(() => 0);
          for (const k of steps) {
            const i = next[k]++;
            await t.set(keys[k], perKey[k][i], String(i));
          }
          await eventually(() => keys.every((key, k) => r.seen.get(key)?.at(-1)?.version === String(perKey[k].length - 1)), 'every key to reach its last write');
          for (const [k, key] of keys.entries()) {
            const got = r.seen.get(key)!.filter((g, j, all) => j === 0 || g.version !== all[j - 1].version);
            expect(got).toEqual(perKey[k].map((value, i) => ({ value, version: String(i) })));
          }
        } finally {
          await w.stop();
        }
      }),
      { numRuns: 15 },
    );
  });
});
