/**
 * pubsub.redis against a real Redis: publish/subscribe through a consumer group, acknowledge on
 * success only, pending messages of a consumer that went away claimed after processingTimeout,
 * replicas of one app sharing a topic, maxLenApprox trimming, and metadata errors.
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factory, streamSettings } from '../../sidecar/src/components/pubsub/redis/index.ts';
import type { BulkPublishEntry, PubSub, PubSubMessage } from '../../sidecar/src/components/pubsub/types.ts';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { componentContext, spec } from '../state/helpers.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);

const opened: PubSub[] = [];
async function open(extra: Record<string, string> = {}, appId = 'app'): Promise<PubSub> {
  const p = factory() as PubSub;
  await p.init(spec('pubsub.redis', { ...redisMetadata(target), ...extra }), { ...componentContext, appId });
  opened.push(p);
  return p;
}

const topicName = (t: string) => `rt-test-${t}-${Date.now()}-${Math.random().toString(16).slice(2, 8)}`;

async function until(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.skipIf(!available)('pubsub.redis against a real Redis', () => {
  let redis: Redis;
  const topics: string[] = [];
  beforeAll(() => {
    redis = new Redis({ host: target.host, port: target.port, db: target.db, username: target.username, password: target.password });
  });
  afterAll(async () => {
    for (const p of opened) await p.close();
    if (topics.length) await redis.del(...topics);
    redis.disconnect();
  });

  it('delivers what is published, with content type and metadata, and acknowledges it', async () => {
    const topic = topicName('basic');
    topics.push(topic);
    const p = await open();
    const got: PubSubMessage[] = [];
    p.subscribe(topic, {}, async (m) => void got.push(m));
    await p.publish(topic, Buffer.from('{"a":1}'), { k: 'v' }, 'application/json');
    await until(() => got.length === 1);
    expect(Buffer.from(got[0].data).toString()).toBe('{"a":1}');
    expect(got[0]).toMatchObject({ topic, contentType: 'application/json', metadata: { k: 'v' } });
    await until(async () => ((await redis.xpending(topic, 'app')) as [number])[0] === 0);
  });

  it('bulkPublish adds every entry in one go; an entry Redis refuses fails alone', async () => {
    const topic = topicName('bulk');
    topics.push(topic);
    const p = await open();
    const got: PubSubMessage[] = [];
    p.subscribe(topic, {}, async (m) => void got.push(m));
    const entries: BulkPublishEntry[] = Array.from({ length: 50 }, (_, i) => ({ entryId: `e${i}`, event: Buffer.from(JSON.stringify({ i })), contentType: 'application/json', metadata: i === 0 ? { k: 'v' } : ({} as Record<string, string>) }));
    expect(await p.bulkPublish!(topic, entries)).toEqual([]);
    await until(() => got.length === 50);
    expect(got.map((m) => JSON.parse(Buffer.from(m.data).toString()).i).sort((a, b) => a - b)).toEqual(entries.map((_, i) => i));
    expect(got.find((m) => JSON.parse(Buffer.from(m.data).toString()).i === 0)?.metadata).toEqual({ k: 'v' });
    // a key of another type under the topic's name: XADD fails for each entry, with Redis's reason
    const wrong = topicName('bulk-wrongtype');
    topics.push(wrong);
    await redis.set(wrong, 'not a stream');
    // published in the same turn, so gathered into the same flush: the good stream's entries still go in
    const before = got.length;
    const [failed, fine] = await Promise.all([p.bulkPublish!(wrong, entries.slice(0, 2)), p.bulkPublish!(topic, entries.slice(0, 3))]);
    expect(failed.map((f) => f.entryId)).toEqual(['e0', 'e1']);
    expect(failed[0].error).toMatch(/WRONGTYPE/);
    expect(fine).toEqual([]);
    await until(() => got.length === before + 3);
  });

  it('entries packed into one script argument come out as they went in: any bytes, multi-byte content types and metadata, empty data', async () => {
    const p = await open();
    // data with newlines, spaces and digits (the packing's separators), arbitrary bytes, UTF-8 beyond ASCII
    const entry = fc.record({
      event: fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.constantFrom(new Uint8Array(), Buffer.from('12 34\n5\n\n'))),
      contentType: fc.option(fc.constantFrom('application/json', 'text/plain; charset=ütf-8', 'application/x-ölçü'), { nil: undefined }),
      metadata: fc.dictionary(fc.stringMatching(/^[a-zü0-9 ]{1,8}$/), fc.string({ maxLength: 12 }), { maxKeys: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(entry, { minLength: 1, maxLength: 30 }), async (list) => {
        const topic = topicName('packed');
        topics.push(topic);
        const got: PubSubMessage[] = [];
        const sub = p.subscribe(topic, {}, async (m) => void got.push(m));
        try {
          const entries: BulkPublishEntry[] = list.map((e, i) => ({ entryId: String(i), ...e }));
          expect(await p.bulkPublish!(topic, entries)).toEqual([]);
          await until(() => got.length === list.length);
          // one stream, one reader: delivered in the order added
          got.forEach((m, i) => {
            expect(Buffer.from(m.data).equals(Buffer.from(list[i].event))).toBe(true);
            expect(m.contentType).toBe(list[i].contentType);
            expect(m.metadata).toEqual(list[i].metadata);
          });
        } finally {
          sub.close();
        }
      }),
      { numRuns: 15 },
    );
  });

  it('a failed message stays pending and is delivered again after processingTimeout', async () => {
    const topic = topicName('retry');
    topics.push(topic);
    const p = await open({ processingTimeout: '300ms', redeliverInterval: '100ms' });
    let calls = 0;
    p.subscribe(topic, {}, async () => {
      if (++calls < 3) throw new Error('not yet');
    });
    await p.publish(topic, Buffer.from('x'));
    await until(() => calls >= 3);
    await until(async () => ((await redis.xpending(topic, 'app')) as [number])[0] === 0);
  });

  it("claims the pending messages of a consumer that went away (another replica of the app)", async () => {
    const topic = topicName('claim');
    topics.push(topic);
    const p = await open({ processingTimeout: '500ms', redeliverInterval: '200ms' }, 'claimer');
    await redis.xgroup('CREATE', topic, 'claimer', '0', 'MKSTREAM');
    for (let i = 0; i < 5; i++) await p.publish(topic, Buffer.from(`m${i}`));
    // a "dead" replica reads everything and never acknowledges
    const read = (await redis.xreadgroup('GROUP', 'claimer', 'dead-replica', 'COUNT', 100, 'STREAMS', topic, '>')) as [string, unknown[]][];
    expect(read[0][1]).toHaveLength(5);
    const got = new Set<string>();
    p.subscribe(topic, {}, async (m) => void got.add(Buffer.from(m.data).toString()));
    await until(() => got.size === 5);
    await until(async () => ((await redis.xpending(topic, 'claimer')) as [number])[0] === 0);
  });

  it('replicas in one consumer group share the messages; another app gets all of them', async () => {
    const topic = topicName('share');
    topics.push(topic);
    const [a, b, other] = [await open({}, 'shared'), await open({}, 'shared'), await open({}, 'other-app')];
    const seenA: string[] = [];
    const seenB: string[] = [];
    const seenOther: string[] = [];
    a.subscribe(topic, {}, async (m) => void seenA.push(Buffer.from(m.data).toString()));
    b.subscribe(topic, {}, async (m) => void seenB.push(Buffer.from(m.data).toString()));
    other.subscribe(topic, {}, async (m) => void seenOther.push(Buffer.from(m.data).toString()));
    // both groups are on the stream (the shared one and the other app's)
    const groups = async () => ((await redis.xinfo('GROUPS', topic).catch(() => [])) as unknown[][]).map((g) => g[g.indexOf('name') + 1]);
    await until(async () => {
      const g = await groups();
      return g.includes('shared') && g.includes('other-app');
    });
    for (let i = 0; i < 50; i++) await a.publish(topic, Buffer.from(String(i)));
    await until(() => seenA.length + seenB.length === 50 && seenOther.length === 50);
    expect(new Set([...seenA, ...seenB]).size).toBe(50);
  });

  it('maxLenApprox trims the stream', async () => {
    const topic = topicName('trim');
    topics.push(topic);
    const p = await open({ maxLenApprox: '100' });
    for (let i = 0; i < 1000; i++) await p.publish(topic, Buffer.from(String(i)));
    const len = await redis.xlen(topic);
    expect(len).toBeLessThan(300);
    expect(len).toBeGreaterThanOrEqual(100);
  });

  it('publishes through a Redis user that may not run scripts (one XADD each instead)', async () => {
    const topic = topicName('noscript');
    topics.push(topic);
    const user = `rt-noscript-${Date.now()}`;
    await redis.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-@scripting');
    try {
      const p = await open({ redisUsername: user, redisPassword: 'pw', maxLenApprox: '1000' });
      const got: string[] = [];
      p.subscribe(topic, {}, async (m) => void got.push(Buffer.from(m.data).toString()));
      await p.publish(topic, Buffer.from('one'));
      expect(await p.bulkPublish!(topic, [0, 1, 2].map((i) => ({ entryId: String(i), event: Buffer.from(`bulk-${i}`), contentType: 'text/plain', metadata: {} })))).toEqual([]);
      await until(() => got.length === 4);
      expect(got.sort()).toEqual(['bulk-0', 'bulk-1', 'bulk-2', 'one']);
    } finally {
      await redis.call('ACL', 'DELUSER', user);
    }
  });

  it('fails to start with a clear message when Redis is not there', async () => {
    const p = factory() as PubSub;
    await expect(p.init(spec('pubsub.redis', { redisHost: '127.0.0.1:1' }), componentContext)).rejects.toThrow(/ECONNREFUSED|connect/i);
    await p.close();
  });
});

describe('pubsub.redis metadata', () => {
  it('reads durations, counts and the consumer group, and names what is wrong', () => {
    expect(streamSettings({}, 'app1')).toEqual({ consumerGroup: 'app1', processingTimeoutMs: 60_000, redeliverIntervalMs: 15_000, concurrency: 10, maxLenApprox: undefined });
    expect(streamSettings({ consumerID: 'g', processingTimeout: '5s', redeliverInterval: '2', concurrency: '3', maxLenApprox: '1000' }, 'x')).toEqual({ consumerGroup: 'g', processingTimeoutMs: 5000, redeliverIntervalMs: 2000, concurrency: 3, maxLenApprox: 1000 });
    expect(() => streamSettings({ processingTimeout: 'soon' }, 'a')).toThrow(/processingTimeout/);
    expect(() => streamSettings({ concurrency: '0' }, 'a')).toThrow(/concurrency/);
    expect(() => streamSettings({ maxLenApprox: '-5' }, 'a')).toThrow(/maxLenApprox/);
  });
});
