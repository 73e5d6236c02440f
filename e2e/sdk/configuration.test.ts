/**
 * The configuration cases of the @dapr/dapr JS SDK's own end-to-end suite (its
 * test/e2e/grpc/client.test.ts, "configuration": 6 cases), replayed against rt as the SDK's
 * DaprClient calls it over gRPC: a `config-redis` configuration.redis component, items written
 * with MSET as `value||version`, get, subscribe to every key, to some keys, with metadata,
 * unsubscribe (stop), and two streams on one key. The SDK suite writes with `docker exec
 * redis-cli` and reads the callback's first call right after; here the test waits for that call
 * (up to 5 s) instead of relying on docker's delay. A database of its own, so that other suites'
 * keys do not reach the subscription to every key.
 */
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { configurationRedisMetadata, eventually, redisClient } from '../../test/configuration/helpers.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../../test/grpc/harness.ts';
import { requireService } from '../../test/services/ci.ts';
import { redisTarget } from '../../test/services/redis.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const md = configurationRedisMetadata(redis, 15);
const noop = () => undefined;

type Items = Record<string, { value: string }>;
let s: RuntimeSidecar;
let client: DaprClient;
let r: Awaited<ReturnType<typeof redisClient>>;

beforeAll(async () => {
  if (!haveRedis) return;
  r = await redisClient(redis, Number(md.redisDB));
  s = await startRuntimeSidecar({ extraComponents: [componentYaml('config-redis', 'configuration.redis', md)] });
  client = new DaprClient({
    daprHost: '127.0.0.1',
    daprPort: String(s.sidecar.grpcPort),
    communicationProtocol: CommunicationProtocolEnum.GRPC,
    logger: { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } },
  });
});
afterAll(async () => {
  await client?.stop().catch(() => undefined);
  await s?.stop();
  if (r) {
    await r.del('myconfigkey1', 'myconfigkey2', 'myconfigkey3');
    r.disconnect();
  }
});

/** A callback recording its calls, as the SDK suite's jest.fn(). */
function recorder() {
  const calls: Items[] = [];
  return { calls, cb: async (res: { items: Items }) => void calls.push(res.items) };
}

/** Waits for the SDK's stream to be open (subscribe returns before it is). */
async function opened(before: number): Promise<void> {
  await eventually(() => s.sidecar.ctx.services.configuration!.ids().length > before, 'the subscription to open');
}

const subscriptions = () => s.sidecar.ctx.services.configuration!.ids().length;

describe.runIf(haveRedis)('the JS SDK suite configuration cases', () => {
  beforeEach(async () => {
    await r.mset('myconfigkey1', 'key1_initialvalue||1', 'myconfigkey2', 'key2_initialvalue||1', 'myconfigkey3', 'key3_initialvalue||1');
  });

  it('gets the configuration items', async () => {
    const config = await client.configuration.get('config-redis', ['myconfigkey1', 'myconfigkey2', 'myconfigkey3']);
    expect(Object.keys(config.items).sort()).toEqual(['myconfigkey1', 'myconfigkey2', 'myconfigkey3']);
    expect(config.items.myconfigkey3.value).toBe('key3_initialvalue');
  });

  it('subscribes to changes on all keys', async () => {
    const m = recorder();
    const n = subscriptions();
    const stream = await client.configuration.subscribe('config-redis', m.cb);
    await opened(n);
    await r.mset('myconfigkey3', 'mynewvalue||2');
    await eventually(() => m.calls.length > 0, 'the first call');
    expect(Object.keys(m.calls[0])).toEqual(['myconfigkey3']);
    expect(m.calls[0].myconfigkey3.value).toBe('mynewvalue');
    await stream.stop();
  });

  it('subscribes to changes on specific keys, and with metadata', async () => {
    for (const withMetadata of [false, true]) {
      const m = recorder();
      const n = subscriptions();
      const stream = withMetadata
        ? await client.configuration.subscribeWithMetadata('config-redis', ['myconfigkey1', 'myconfigkey2'], { hello: 'world' }, m.cb)
        : await client.configuration.subscribeWithKeys('config-redis', ['myconfigkey1', 'myconfigkey2'], m.cb);
      await opened(n);
      await r.mset('myconfigkey3', 'not-watched||9', 'myconfigkey1', 'key1_mynewvalue||1');
      await eventually(() => m.calls.length > 0, 'the first call');
      expect(Object.keys(m.calls[0])).toEqual(['myconfigkey1']);
      expect(m.calls[0].myconfigkey1.value).toBe('key1_mynewvalue');
      await stream.stop();
    }
  });

  it('unsubscribes: no call after stop', async () => {
    const m = recorder();
    const n = subscriptions();
    const stream = await client.configuration.subscribeWithMetadata('config-redis', ['myconfigkey1', 'myconfigkey2'], { hello: 'world' }, m.cb);
    await opened(n);
    await r.mset('myconfigkey1', 'key1_mynewvalue||1');
    await eventually(() => m.calls.length > 0, 'the first call');
    // a marker on a second stream: the store's one subscriber connection gets notifications in
    // the order of the writes, so a call for the write after stop would come before the marker's
    const marker = recorder();
    const markerStream = await client.configuration.subscribeWithKeys('config-redis', ['myconfigkey3'], marker.cb);
    await opened(n + 1);
    await stream.stop();
    await eventually(() => subscriptions() === n + 1, 'the subscription to end');
    await r.mset('myconfigkey1', 'key1_mynewvalue2||1');
    await r.mset('myconfigkey3', 'marker||2');
    await eventually(() => marker.calls.length > 0, 'the marker');
    await markerStream.stop();
    expect(m.calls.map((c) => c.myconfigkey1.value)).toEqual(['key1_mynewvalue']);
  });

  it('subscribes through multiple streams', async () => {
    const [m1, m2] = [recorder(), recorder()];
    const n = subscriptions();
    const stream1 = await client.configuration.subscribeWithKeys('config-redis', ['myconfigkey1'], m1.cb);
    const stream2 = await client.configuration.subscribeWithKeys('config-redis', ['myconfigkey1'], m2.cb);
    await opened(n + 1);
    await r.mset('myconfigkey1', 'key1_mynewvalue||1');
    await eventually(() => m1.calls.length > 0 && m2.calls.length > 0, 'a call on each stream');
    for (const m of [m1, m2]) expect(m.calls[0]).toEqual({ myconfigkey1: expect.objectContaining({ value: 'key1_mynewvalue' }) });
    await stream1.stop();
    await stream2.stop();
  });
});
