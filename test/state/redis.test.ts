import { describe, expect, it } from 'vitest';
import { factory, parseRedisHost } from '../../sidecar/src/components/state/redis/index.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { REDIS_ETAG_RULES } from '../../sidecar/src/components/state/common.ts';
import { describeStateStoreConformance } from '../conformance/state-store.ts';
import { componentContext, spec } from './helpers.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);

async function open(extra: Record<string, string> = {}): Promise<StateStore> {
  const s = factory() as StateStore;
  await s.init(spec('state.redis', { ...redisMetadata(target), ...extra }), componentContext);
  return s;
}

describe.skipIf(!available)('state.redis against a real Redis', () => {
  describeStateStoreConformance('state.redis', () => open(), (s) => s.close(), REDIS_ETAG_RULES);

  it("component metadata ttlInSeconds is the TTL of writes that name none (a request's own wins, -1 = never)", async () => {
    const s = await open({ ttlInSeconds: '100' });
    const key = `ttl-default-${Date.now()}`;
    try {
      await s.set({ key, value: Buffer.from('1') });
      const left = Date.parse((await s.get(key))!.metadata!.ttlExpireTime) - Date.now();
      expect(left).toBeGreaterThan(90_000);
      expect(left).toBeLessThanOrEqual(100_000);
      await s.set({ key, value: Buffer.from('2'), metadata: { ttlInSeconds: '-1' } });
      expect((await s.get(key))!.metadata).toBeUndefined();
    } finally {
      await s.delete({ key });
      await s.close();
    }
    await expect(open({ ttlInSeconds: 'soon' })).rejects.toThrow(/metadata field "ttlInSeconds" "soon" is not a whole number/);
  });

  it('fails to start with a clear message when Redis is not there', async () => {
    const s = factory() as StateStore;
    await expect(s.init(spec('state.redis', { redisHost: '127.0.0.1:1' }), componentContext)).rejects.toThrow(/ECONNREFUSED|connect/i);
    await s.close();
  });
});

describe('state.redis metadata', () => {
  it('parses redisHost forms and rejects what it cannot use', async () => {
    expect(parseRedisHost('localhost:6380')).toEqual({ host: 'localhost', port: 6380 });
    expect(parseRedisHost('redis')).toEqual({ host: 'redis', port: 6379 });
    expect(parseRedisHost('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    expect(() => parseRedisHost('host:99999')).toThrow(/port/);
    const s = factory() as StateStore;
    await expect(s.init(spec('state.redis', {}), componentContext)).rejects.toThrow(/metadata field "redisHost" is required/);
    await expect(s.init(spec('state.redis', { redisHost: 'x:1', redisType: 'cluster' }), componentContext)).rejects.toThrow(/not supported/);
  });
});
