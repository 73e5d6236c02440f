/**
 * The distributed lock cases of the @dapr/dapr JS SDK's own end-to-end suite (its
 * test/e2e/common/client.test.ts, "distributed lock": 7 cases, each over HTTP and gRPC: 14), and
 * its bindings.redis case (test/e2e/grpc/server.test.ts: a `create` through `binding-redis` read
 * back through `config-redis`; the SDK reads configuration over gRPC only), replayed against rt as the SDK's DaprClient calls them: a
 * `redislock` lock.redis component, a `binding-redis` bindings.redis and a `config-redis`
 * configuration.redis on one Redis database of their own.
 */
import { randomUUID } from 'node:crypto';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configurationRedisMetadata, redisClient } from '../../test/configuration/helpers.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../../test/grpc/harness.ts';
import { requireService } from '../../test/services/ci.ts';
import { redisTarget } from '../../test/services/redis.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const md = configurationRedisMetadata(redis, 8);
const noop = () => undefined;
/** The SDK's LockStatus (not exported from its index): the reference's enum numbers. */
const LockStatus = { Success: 0, LockDoesNotExist: 1, LockBelongsToOthers: 2 } as const;

let s: RuntimeSidecar;
let clients: Record<'http' | 'grpc', DaprClient>;
let r: Awaited<ReturnType<typeof redisClient>>;

beforeAll(async () => {
  if (!haveRedis) return;
  r = await redisClient(redis, Number(md.redisDB));
  s = await startRuntimeSidecar({
    extraComponents: [componentYaml('redislock', 'lock.redis', md), componentYaml('binding-redis', 'bindings.redis', md), componentYaml('config-redis', 'configuration.redis', md)],
  });
  const client = (protocol: CommunicationProtocolEnum, port: number) =>
    new DaprClient({ daprHost: '127.0.0.1', daprPort: String(port), communicationProtocol: protocol, logger: { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } } });
  clients = { http: client(CommunicationProtocolEnum.HTTP, s.sidecar.httpPort), grpc: client(CommunicationProtocolEnum.GRPC, s.sidecar.grpcPort) };
});
afterAll(async () => {
  for (const c of Object.values(clients ?? {})) await c.stop().catch(() => undefined);
  await s?.stop();
  if (r) {
    const keys = await r.keys('lock||*');
    await r.del('helloKey', ...keys);
    r.disconnect();
  }
});

/** One case over both protocols, as the SDK suite's runIt. */
function runIt(name: string, fn: (c: DaprClient) => Promise<void>): void {
  for (const protocol of ['http', 'grpc'] as const) it(`${protocol}/${name}`, () => fn(clients[protocol]));
}

describe.runIf(haveRedis)('the JS SDK suite distributed lock cases', () => {
  runIt('acquires a new lock and unlocks it', async (c) => {
    const id = randomUUID();
    expect((await c.lock.lock('redislock', id, 'owner1', 1000)).success).toBe(true);
    expect((await c.lock.unlock('redislock', id, 'owner1')).status).toBe(LockStatus.Success);
  });

  runIt('cannot unlock a lock that was not acquired', async (c) => {
    expect((await c.lock.unlock('redislock', randomUUID(), 'owner1')).status).toBe(LockStatus.LockDoesNotExist);
  });

  // the SDK suite sleeps 2 s and tries again; Redis keeps the lease on its own clock, so its
  // remaining time proves the same without the wait: more than 4 s left of 5, still held
  runIt('a lock still held 2 s into its 5 s is not taken by another owner', async (c) => {
    const id = randomUUID();
    expect((await c.lock.lock('redislock', id, 'owner1', 5)).success).toBe(true);
    const keys = await r.keys(`lock||*${id}`);
    expect(keys).toHaveLength(1);
    const left = await r.pttl(keys[0]!);
    expect(left).toBeGreaterThan(4000);
    expect(left).toBeLessThanOrEqual(5000);
    expect((await c.lock.lock('redislock', id, 'owner2', 5)).success).toBe(false);
  });

  runIt('cannot acquire a lock another owner holds', async (c) => {
    const id = randomUUID();
    expect((await c.lock.lock('redislock', id, 'owner1', 5)).success).toBe(true);
    expect((await c.lock.lock('redislock', id, 'owner2', 5)).success).toBe(false);
  });

  runIt('acquires a different lock than the one another owner holds', async (c) => {
    expect((await c.lock.lock('redislock', randomUUID(), 'owner1', 5)).success).toBe(true);
    expect((await c.lock.lock('redislock', randomUUID(), 'owner2', 5)).success).toBe(true);
  });

  runIt('cannot acquire a lock another owner/process holds', async (c) => {
    const id = randomUUID();
    expect((await c.lock.lock('redislock', id, 'owner3', 5)).success).toBe(true);
    expect((await c.lock.lock('redislock', id, 'owner4', 5)).success).toBe(false);
  });

  runIt('cannot unlock a lock another owner/process holds', async (c) => {
    const id = randomUUID();
    expect((await c.lock.lock('redislock', id, 'owner5', 5)).success).toBe(true);
    expect((await c.lock.unlock('redislock', id, 'owner6')).status).toBe(LockStatus.LockBelongsToOthers);
  });
});

describe.runIf(haveRedis)('the JS SDK suite bindings.redis case', () => {
  it('sends metadata to an output binding: a create through binding-redis is read back through config-redis', async () => {
    await clients.grpc.binding.send('binding-redis', 'create', 'helloMessage', { key: 'helloKey' });
    const res = await clients.grpc.configuration.get('config-redis', ['helloKey']);
    expect(res.items.helloKey.value).toContain('helloMessage');
  });
});
