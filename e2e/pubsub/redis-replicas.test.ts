/**
 * Two real `rt sidecar` processes, replicas of one app, on pubsub.redis against a real Redis.
 * One replica's app holds every message it gets; that sidecar is killed with SIGKILL mid-way.
 * The messages it had taken (pending in the consumer group) are claimed by the other replica:
 * every published message reaches the app at least once, none is lost.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { freePort } from '../../test/services/net.ts';
import { redisMetadata, redisTarget } from '../../test/services/redis.ts';
import { component, startApp, type TestApp } from '../../test/pubsub/helpers.ts';
import { runRt, until, type RtProcess } from '../rt-process.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);

describe.skipIf(!available)('pubsub.redis: a replica killed with kill -9 loses no message', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rt-pubsub-e2e-'));
  const topic = `rt-e2e-orders-${Date.now()}`;
  const group = `rt-e2e-app-${Date.now()}`;
  const procs: RtProcess[] = [];
  const apps: TestApp[] = [];
  const held: (() => void)[] = [];
  const redis = new Redis({ host: target.host, port: target.port, db: target.db, username: target.username, password: target.password, lazyConnect: true });

  afterAll(async () => {
    for (const release of held) release();
    for (const p of procs) {
      if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
      await p.exit;
    }
    for (const a of apps) await a.close();
    await redis.del(topic).catch(() => undefined);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  async function replica(name: string, app: TestApp): Promise<{ rt: RtProcess; base: string }> {
    const httpPort = await freePort();
    const rt = runRt(
      ['sidecar', '--app-id', 'orders', '--app-port', String(app.port), '--http-port', String(httpPort), '--grpc-port', String(await freePort()), '--disable-metrics', '--resources-path', join(dir, 'resources'), '--data-dir', join(dir, name), '--log-level', 'warn'],
      {},
    );
    procs.push(rt);
    return { rt, base: `http://127.0.0.1:${httpPort}` };
  }

  it('the survivor gets every message, including those the dead replica had taken', async () => {
    mkdirSync(join(dir, 'resources'));
    writeFileSync(
      join(dir, 'resources', 'pubsub.yaml'),
      [
        component('queue', 'pubsub.redis', { ...redisMetadata(target), consumerID: group, processingTimeout: '2s', redeliverInterval: '500ms', concurrency: '5' }),
        `apiVersion: rt.io/v1alpha1\nkind: Subscription\nmetadata:\n  name: orders\nspec:\n  pubsubname: queue\n  topic: ${topic}\n  route: /orders\n`,
      ].join('---\n'),
    );
    const doomedApp = await startApp();
    const survivorApp = await startApp();
    apps.push(doomedApp, survivorApp);
    // the doomed replica's app takes messages and never answers while its sidecar lives
    doomedApp.answer = () => new Promise((r) => held.push(() => r({ status: 500 })));
    const doomed = await replica('a', doomedApp);
    await doomedApp.opened(doomed.base, [topic]);
    const survivor = await replica('b', survivorApp);
    await survivorApp.opened(survivor.base, [topic]);

    const N = 60;
    for (let i = 0; i < N; i++) {
      const res = await fetch(`${survivor.base}/v1.0/publish/queue/${topic}`, { method: 'POST', body: JSON.stringify({ n: i }), headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(204);
    }
    await until(doomed.rt, () => doomedApp.deliveries.length >= 5);
    doomed.rt.proc.kill('SIGKILL');
    expect(await doomed.rt.exit).toBeNull();
    const taken = new Set(doomedApp.deliveries.map((d) => (d.body.data as { n: number }).n));
    expect(taken.size).toBeGreaterThanOrEqual(5);

    const survived = () => new Set(survivorApp.deliveries.map((d) => (d.body.data as { n: number }).n));
    await until(survivor.rt, () => survived().size === N, 30_000);
    for (const n of taken) expect(survived().has(n)).toBe(true);
    await redis.connect();
    const deadline = Date.now() + 10_000;
    let pending = -1;
    while (Date.now() < deadline) {
      pending = ((await redis.xpending(topic, group)) as [number])[0];
      if (pending === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending).toBe(0);
  }, 60_000);
});
