/**
 * The engine on a Redis actor state store: a workflow with a timer and activities completes,
 * its keys live in Redis, and purge removes every one of them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient, TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { redisMetadata, redisTarget } from '../../test/services/redis.ts';
import { quietSdkLogs, sidecarForTest, type TestSidecar } from './harness.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.redisHost} (set RT_TEST_REDIS_URL)`);
const appId = `wf-redis-${process.pid}-${Date.now()}`;

let sc: TestSidecar;
let worker: TaskHubGrpcWorker;
let client: TaskHubGrpcClient;
let redis: Redis;
let resources: string;
let restore: () => void;

beforeAll(async () => {
  if (!available) return;
  restore = quietSdkLogs();
  resources = mkdtempSync(join(tmpdir(), 'rt-wf-redis-'));
  const md = { ...redisMetadata(target), actorStateStore: 'true' };
  const lines = Object.entries(md).map(([k, v]) => `  - name: ${k}\n    value: "${v}"`).join('\n');
  writeFileSync(join(resources, 'redis.yaml'), `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: wfredis\nspec:\n  type: state.redis\n  version: v1\n  metadata:\n${lines}\n`);
  sc = await sidecarForTest(appId, { resourcesPaths: [resources] });
  worker = new TaskHubGrpcWorker(sc.grpcAddress);
  worker.addNamedActivity('add', async (_: unknown, n: number) => n + 1);
  worker.addNamedOrchestrator('timed', async function* (ctx: any, n: number): any {
    const a: number = yield ctx.callActivity('add', n);
    yield ctx.createTimer(0.3);
    return yield ctx.callActivity('add', a);
  });
  await worker.start();
  client = new TaskHubGrpcClient(sc.grpcAddress);
  redis = new Redis({ host: target.host, port: target.port, username: target.username, password: target.password, db: target.db });
});

afterAll(async () => {
  await worker?.stop().catch(() => undefined);
  await client?.stop().catch(() => undefined);
  await sc?.stop();
  if (redis) {
    const left = await redis.keys(`${appId}||*`);
    if (left.length) await redis.del(...left);
    redis.disconnect();
  }
  if (resources) rmSync(resources, { recursive: true, force: true });
  restore?.();
});

describe.skipIf(!available)('workflows on a Redis actor state store', () => {
  it('completes a workflow with a timer and purges every key of it', async () => {
    const id = await client.scheduleNewOrchestration('timed', 1, 'redis-1');
    const st = await client.waitForOrchestrationCompletion(id, true, 20);
    expect(st?.runtimeStatus).toBe(OrchestrationStatus.COMPLETED);
    expect(st?.serializedOutput).toBe('3');
    const keys = await redis.keys(`${appId}||wf||redis-1||*`);
    expect(keys).toContain(`${appId}||wf||redis-1||m`);
    expect(keys.filter((k) => /\|\|h\d+$/.test(k)).length).toBeGreaterThan(1);
    await client.purgeOrchestration(id);
    expect(await redis.keys(`${appId}||wf||redis-1||*`)).toEqual([]);
  });
});
