/**
 * lock.redis on its own against a real Redis: one owner at a time, release only by the owner,
 * expiry frees the lock, the key layout the reference runtime uses, and the start checks.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectedReplicas, factory } from '../../sidecar/src/components/lock/redis/index.ts';
import { UNLOCK_STATUS, type LockStore } from '../../sidecar/src/components/lock/types.ts';
import { lockKey, lockKeyPrefix } from '../../sidecar/src/lock/keys.ts';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { componentContext, spec } from '../state/helpers.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);
const run = `t${process.pid}-${Date.now()}`;

describe.skipIf(!available)('lock.redis against a real Redis', () => {
  let store: LockStore;
  let redis: Redis;

  beforeAll(async () => {
    store = factory() as LockStore;
    await store.init(spec('lock.redis', redisMetadata(target)), componentContext);
    redis = new Redis(target.url);
  });
  afterAll(async () => {
    await store?.close();
    if (redis) {
      const keys = await redis.keys(`lock||${run}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it('holds a lock for one owner at a time, and only that owner releases it', async () => {
    const key = `lock||${run}-a`;
    expect(await store.tryLock({ key, lockOwner: 'o1', expiryInSeconds: 30 })).toBe(true);
    expect(await store.tryLock({ key, lockOwner: 'o2', expiryInSeconds: 30 })).toBe(false);
    // the holder asking again does not take it twice either (SET NX)
    expect(await store.tryLock({ key, lockOwner: 'o1', expiryInSeconds: 30 })).toBe(false);
    expect(await redis.get(key)).toBe('o1');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(28_000);
    expect(ttl).toBeLessThanOrEqual(30_000);

    expect(await store.unlock({ key, lockOwner: 'o2' })).toBe(UNLOCK_STATUS.LOCK_BELONGS_TO_OTHERS);
    expect(await redis.get(key)).toBe('o1');
    expect(await store.unlock({ key, lockOwner: 'o1' })).toBe(UNLOCK_STATUS.SUCCESS);
    expect(await redis.exists(key)).toBe(0);
    expect(await store.unlock({ key, lockOwner: 'o1' })).toBe(UNLOCK_STATUS.LOCK_DOES_NOT_EXIST);
    expect(await store.tryLock({ key, lockOwner: 'o2', expiryInSeconds: 30 })).toBe(true);
  });

  it('frees a lock when its expiry passes', async () => {
    const key = `lock||${run}-exp`;
    expect(await store.tryLock({ key, lockOwner: 'o1', expiryInSeconds: 1 })).toBe(true);
    expect(await store.tryLock({ key, lockOwner: 'o2', expiryInSeconds: 1 })).toBe(false);
    const deadline = Date.now() + 5000;
    while ((await redis.exists(key)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await store.unlock({ key, lockOwner: 'o1' })).toBe(UNLOCK_STATUS.LOCK_DOES_NOT_EXIST);
    expect(await store.tryLock({ key, lockOwner: 'o2', expiryInSeconds: 1 })).toBe(true);
  });

  it('a failing Redis call is an error, not a status (a key of another type)', async () => {
    const key = `lock||${run}-hash`;
    await redis.hset(key, 'f', 'v');
    await expect(store.unlock({ key, lockOwner: 'o1' })).rejects.toThrow(/WRONGTYPE/);
  });

  it('fails to start with a clear message when Redis is not there', async () => {
    const s = factory() as LockStore;
    await expect(s.init(spec('lock.redis', { redisHost: '127.0.0.1:1' }), componentContext)).rejects.toThrow(/ECONNREFUSED|connect/i);
    await s.close();
  });
});

describe('lock.redis metadata and keys', () => {
  it('refuses missing or unusable metadata at start', async () => {
    const s = factory() as LockStore;
    await expect(s.init(spec('lock.redis', {}), componentContext)).rejects.toThrow(/metadata field "redisHost" is required/);
    await expect(s.init(spec('lock.redis', { redisHost: 'x:1', keyPrefix: 'a||b' }), componentContext)).rejects.toThrow(/keyPrefix.*must not contain "\|\|"/);
    await expect(s.init(spec('lock.redis', { redisHost: 'x:1', redisType: 'cluster' }), componentContext)).rejects.toThrow(/not supported/);
  });

  it('reads the replica count of INFO replication', () => {
    expect(connectedReplicas('# Replication\r\nrole:master\r\nconnected_slaves:2\r\n')).toBe(2);
    expect(connectedReplicas('# Replication\r\nrole:master\r\nconnected_slaves:0\r\n')).toBe(0);
    expect(connectedReplicas('')).toBe(0);
  });

  it("makes the reference runtime's keys: lock||<prefix>||<resource>", () => {
    const key = (keyPrefix: string, appId = 'app') => lockKey(lockKeyPrefix(keyPrefix, 'store', appId), 'res');
    expect(key('appid')).toBe('lock||app||res');
    expect(key('')).toBe('lock||app||res');
    expect(key('appid', '')).toBe('lock||res');
    expect(key('AppID')).toBe('lock||app||res');
    expect(key('name')).toBe('lock||store||res');
    expect(key('none')).toBe('lock||res');
    // read in lower case, as the reference does
    expect(key('Shared')).toBe('lock||shared||res');
  });
});
