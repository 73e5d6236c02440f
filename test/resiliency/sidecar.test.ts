/**
 * Resiliency policies applied by a real sidecar, against real failures:
 * - pub/sub delivery to an app that fails N times, then takes the message: the inbound retry
 *   policy's tries, not the built-in three;
 * - an inbound circuit breaker that opens on a failing app: no delivery while it is open, and
 *   the refusal is counted by policy;
 * - a state store on a private Redis paused with SIGSTOP for longer than the store's timeout
 *   policy: each call ends at the timeout (not when Redis comes back), then the circuit opens and
 *   answers at once naming its policy; once Redis runs again and the breaker's timeout passed,
 *   calls go through.
 * - a Resiliency resource with a mistake stops the start naming the file, resource and field.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSidecar } from '../../sidecar/src/sidecar.ts';
import { requireService } from '../services/ci.ts';
import { REDIS_BIN, startRedis } from '../services/redis.ts';
import type { StartedServer } from '../services/server-process.ts';
import { component, startApp, startPubSubSidecar, subscription, type PubSubSidecar, type TestApp } from '../pubsub/helpers.ts';

const resiliency = (spec: string) => `apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata:\n  name: policies\nspec:\n${spec}`;

describe('pub/sub delivery under an inbound policy', () => {
  let app: TestApp;
  let rt: PubSubSidecar | undefined;
  afterEach(async () => {
    await rt?.close();
    rt = undefined;
    await app?.close();
  });

  const start = async (policy: string) => {
    app = await startApp();
    rt = await startPubSubSidecar([component('mem', 'pubsub.in-memory'), subscription('orders', 'orders', '/orders'), resiliency(policy)].join('---\n'), { appId: 'shop', appPort: app.port });
    await app.opened(rt.base, ['orders']);
  };
  const publish = async (id: string) => {
    const r = await fetch(`${rt!.base}/v1.0/publish/mem/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id }) });
    expect(r.status).toBe(204);
  };

  it('an app that fails 5 times then takes the message gets it on the 6th try, the policy\'s waits apart', async () => {
    await start(`  policies:
    retries:
      fast: { policy: constant, duration: 30ms, maxRetries: 8 }
  targets:
    components:
      mem:
        inbound: { retry: fast }
`);
    let n = 0;
    app.answer = () => (++n <= 5 ? { status: 500 } : { status: 200, body: { status: 'SUCCESS' } });
    await publish('a');
    const ds = await app.waitFor((d) => d.length >= 6);
    const gaps = ds.slice(1).map((d, i) => d.at - ds[i].at);
    expect(gaps.every((g) => g >= 25)).toBe(true);
    const service = rt!.sidecar.ctx.services.resiliency!;
    await vi.waitFor(() => expect(service.outcomes().find((c) => c.outcome === 'success')).toMatchObject({ target: 'component:mem/inbound', count: 1 }));
    expect(service.outcomes()).toContainEqual({ target: 'component:mem/inbound', policy: 'fast', outcome: 'retry', count: 5 });
    // the built-in policy would have given up after 4 tries
    expect(ds.filter((d) => d.body.data && (d.body.data as { id: string }).id === 'a')).toHaveLength(6);
  });

  it('an open circuit delivers nothing until its timeout, and says so in the counts', async () => {
    await start(`  policies:
    retries:
      fast: { policy: constant, duration: 10ms, maxRetries: 50 }
    circuitBreakers:
      cb: { maxRequests: 1, timeout: 60s, trip: consecutiveFailures >= 2 }
  targets:
    components:
      mem:
        inbound: { retry: fast, circuitBreaker: cb }
`);
    app.answer = () => ({ status: 503 });
    await publish('b');
    const service = rt!.sidecar.ctx.services.resiliency!;
    await vi.waitFor(() => expect(service.outcomes().find((c) => c.outcome === 'circuit-open')).toMatchObject({ target: 'component:mem/inbound', policy: 'cb' }), { timeout: 10_000, interval: 10 });
    expect(app.deliveries).toHaveLength(2);
    expect(service.breakers()).toEqual([{ target: 'component:mem/inbound', policy: 'cb', state: 'open' }]);
  });
});

describe('a state store under an outbound timeout and circuit breaker, Redis paused', () => {
  const ok = requireService('redis-server', existsSync(REDIS_BIN), `${REDIS_BIN} not found (Debian package redis-server)`);
  let redis: StartedServer;
  let dir = '';
  let base = '';
  let metrics = '';
  let close: () => Promise<void> = async () => {};
  beforeAll(async () => {
    if (!ok) return;
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'rt-resiliency-'));
    const host = { redisHost: `127.0.0.1:${redis.port}` };
    writeFileSync(join(dir, 'resources.yaml'), [component('store', 'state.redis', host), component('bus', 'pubsub.redis', host), component('kv', 'bindings.redis', host), resiliency(`  policies:
    timeouts:
      DefaultComponentOutboundTimeoutPolicy: 400ms
      quick: 300ms
    retries:
      twice: { policy: constant, duration: 50ms, maxRetries: 1 }
    circuitBreakers:
      storeCB: { maxRequests: 1, timeout: 2s, trip: consecutiveFailures >= 4 }
  targets:
    components:
      store:
        outbound: { timeout: quick, retry: twice, circuitBreaker: storeCB }
`)].join('---\n'));
    const sidecar = await startSidecar({ appId: 'shop', httpPort: 0, grpcPort: 0, enableMetrics: true, metricsPort: 0, dataDir: join(dir, 'data'), resourcesPaths: [dir], logger: pino({ level: 'silent' }) });
    base = `http://127.0.0.1:${sidecar.httpPort}`;
    metrics = `http://127.0.0.1:${sidecar.ctx.metrics!.port}/metrics`;
    close = () => sidecar.close();
  }, 60_000);
  afterAll(async () => {
    if (redis) process.kill(redis.pid, 'SIGCONT');
    await close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const get = async () => {
    const t0 = performance.now();
    const r = await fetch(`${base}/v1.0/state/store/k`);
    return { status: r.status, body: await r.text(), ms: performance.now() - t0 };
  };

  it.skipIf(!ok)('times out each call while Redis is stopped, opens the circuit, answers at once naming it, and recovers; publish and an output binding end at the default keyword\'s timeout', async () => {
    expect((await fetch(`${base}/v1.0/state/store`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: 'v' }]) })).status).toBe(204);
    process.kill(redis.pid, 'SIGSTOP');
    try {
      // two calls of two tries each: every try ends at its 300 ms timeout
      for (let i = 0; i < 2; i++) {
        const r = await get();
        expect(r.status).toBe(500);
        expect(r.body).toMatch(/timeout policy \\"quick\\" \(300 ms\)/);
        expect(r.ms).toBeGreaterThanOrEqual(550);
        expect(r.ms).toBeLessThan(5000);
      }
      // four failures in a row: the circuit is open, and the next call does not wait at all
      const refused = await get();
      expect(refused.status).toBe(500);
      expect(refused.body).toMatch(/circuit breaker \\"storeCB\\" is open/);
      expect(refused.ms).toBeLessThan(250);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    // publishing and an output binding, under the default keyword's timeout
    const stopped = () => process.kill(redis.pid, 'SIGSTOP');
    stopped();
    try {
      for (const [what, url, body] of [
        ['publish', `${base}/v1.0/publish/bus/orders`, { id: 1 }],
        ['binding', `${base}/v1.0/bindings/kv`, { operation: 'get', metadata: { key: 'k' } }],
      ] as const) {
        const t0 = performance.now();
        const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const ms = performance.now() - t0;
        expect({ what, status: r.status }).toEqual({ what, status: 500 });
        expect(await r.text()).toMatch(/timeout policy \\"DefaultComponentOutboundTimeoutPolicy\\" \(400 ms\)/);
        expect(ms).toBeLessThan(3000);
      }
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    // the scrape shows the tries and the open circuit
    const scraped = await (await fetch(metrics)).text();
    expect(scraped).toMatch(/rt_resiliency_outcomes_total\{target="component:store\/outbound",policy="quick",outcome="timeout",app_id="shop"\} 4/);
    expect(scraped).toMatch(/rt_resiliency_outcomes_total\{target="component:store\/outbound",policy="storeCB",outcome="circuit-open",app_id="shop"\} 1/);
    expect(scraped).toMatch(/rt_resiliency_circuit_breaker_state\{target="component:store\/outbound",policy="storeCB",app_id="shop"\} [12]/);
    // after the breaker's 2 s, a trial call goes through and closes it
    await vi.waitFor(async () => {
      const r = await get();
      expect(r.status).toBe(200);
      expect(r.body).toBe('"v"');
    }, { timeout: 10_000, interval: 200 });
    expect(await (await fetch(metrics)).text()).toMatch(/rt_resiliency_circuit_breaker_state\{target="component:store\/outbound",policy="storeCB",app_id="shop"\} 0/);
  });
});

describe('a Resiliency resource with a mistake', () => {
  it('stops the start naming the file, the resource and the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-resiliency-bad-'));
    try {
      const file = join(dir, 'r.yaml');
      writeFileSync(file, resiliency('  policies:\n    retries:\n      r: { policy: sometimes }\n'));
      await expect(startSidecar({ appId: 'shop', httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [dir], logger: pino({ level: 'silent' }) })).rejects.toThrow(`${file}: Resiliency "policies": spec.policies.retries.r.policy: must be constant or exponential, not "sometimes"`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
