/**
 * Configuration and lock calls under their stores' outbound policies, against a private Redis
 * paused with SIGSTOP for longer than the timeout policy:
 * - a configuration get, a subscription's start, a tryLock and an unlock each end at the 300 ms
 *   timeout (not when Redis comes back), with the answer naming the policy;
 * - after two failures the circuit opens: the next call is refused at once, naming the breaker;
 * - /v1.0/metadata and gRPC GetMetadata show the resources, the policies and both breakers open;
 * - once Redis runs again and the breakers' timeout passed, calls go through and the breakers close.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';
import { requireService } from '../services/ci.ts';
import { REDIS_BIN, startRedis } from '../services/redis.ts';
import type { StartedServer } from '../services/server-process.ts';

const RESILIENCY = `apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata:
  name: store-policies
spec:
  policies:
    timeouts:
      quick: 300ms
    circuitBreakers:
      cfgCB: { maxRequests: 1, timeout: 6s, trip: consecutiveFailures >= 2 }
      lockCB: { maxRequests: 1, timeout: 6s, trip: consecutiveFailures >= 2 }
  targets:
    components:
      cfg:
        outbound: { timeout: quick, circuitBreaker: cfgCB }
      locks:
        outbound: { timeout: quick, circuitBreaker: lockCB }
`;

interface ResiliencyField {
  resources: string[];
  policies: { timeouts: string[]; retries: string[]; circuitBreakers: string[] };
  circuitBreakers: { target: string; policy: string; state: string }[];
  outcomes: { target: string; policy: string; outcome: string; count: number }[];
}

describe('configuration and lock calls under outbound policies, Redis paused', () => {
  const ok = requireService('redis-server', existsSync(REDIS_BIN), `${REDIS_BIN} not found (Debian package redis-server)`);
  let redis: StartedServer | undefined;
  let s: RuntimeSidecar | undefined;
  let base = '';
  beforeAll(async () => {
    if (!ok) return;
    redis = await startRedis();
    const md = { redisHost: `127.0.0.1:${redis.port}` };
    s = await startRuntimeSidecar({ appId: 'shop', extraComponents: [componentYaml('cfg', 'configuration.redis', md), componentYaml('locks', 'lock.redis', md), RESILIENCY] });
    base = `http://127.0.0.1:${s.sidecar.httpPort}`;
  }, 60_000);
  afterAll(async () => {
    if (redis) process.kill(redis.pid, 'SIGCONT');
    await s?.stop();
    await redis?.stop();
  });

  const timed = async (call: () => Promise<Response>) => {
    const t0 = performance.now();
    const r = await call();
    return { status: r.status, body: await r.text(), ms: performance.now() - t0 };
  };
  const get = () => timed(() => fetch(`${base}/v1.0/configuration/cfg?key=a`));
  const lock = (path: 'lock' | 'unlock') =>
    timed(() => fetch(`${base}/v1.0-alpha1/${path}/locks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ resourceId: 'r1', lockOwner: 'me', expiryInSeconds: 30 }) }));
  const httpField = async () => ((await (await fetch(`${base}/v1.0/metadata`)).json()) as { resiliency?: ResiliencyField }).resiliency;

  it.skipIf(!ok)('time out at the policy while Redis is stopped, open their circuits, show them in the metadata, and recover', async () => {
    // Redis running: both stores answer, and the metadata lists the policies with no breaker open
    expect((await get()).status).toBe(204);
    expect((await lock('lock')).body).toBe('{"success":true}');
    expect((await lock('unlock')).body).toBe('{"status":0}');
    const before = await httpField();
    expect(before?.resources).toEqual(['store-policies']);
    expect(before?.policies).toEqual({ timeouts: ['quick'], retries: [], circuitBreakers: ['cfgCB', 'lockCB'] });
    expect(before?.circuitBreakers).toEqual(expect.arrayContaining([{ target: 'component:cfg/outbound', policy: 'cfgCB', state: 'closed' }]));

    process.kill(redis!.pid, 'SIGSTOP');
    try {
      // a subscription's start and a get: each ends at the 300 ms timeout
      const t0 = performance.now();
      const sub = s!.sidecar.ctx.services.configuration!.subscribe({ store: 'cfg', keys: ['a'], metadata: {} }, async () => undefined);
      await expect(sub).rejects.toThrow(/timeout policy "quick" \(300 ms\) ran out calling component:cfg\/outbound/);
      expect(performance.now() - t0).toBeLessThan(3000);
      const r = await get();
      expect(r.status).toBe(500);
      expect(r.body).toMatch(/timeout policy \\"quick\\" \(300 ms\)/);
      expect(r.ms).toBeGreaterThanOrEqual(250);
      expect(r.ms).toBeLessThan(3000);
      // two failures in a row: open, and the next get does not wait
      const refused = await get();
      expect(refused.status).toBe(500);
      expect(refused.body).toMatch(/circuit breaker \\"cfgCB\\" is open/);
      expect(refused.ms).toBeLessThan(250);

      // tryLock and unlock likewise
      for (const path of ['lock', 'unlock'] as const) {
        const l = await lock(path);
        expect({ path, status: l.status }).toEqual({ path, status: 500 });
        expect(l.body).toMatch(/timeout policy \\"quick\\" \(300 ms\)/);
        expect(l.ms).toBeLessThan(3000);
      }
      const lockRefused = await lock('lock');
      expect(lockRefused.body).toMatch(/circuit breaker \\"lockCB\\" is open/);
      expect(lockRefused.ms).toBeLessThan(250);

      // both breakers open in the metadata, over HTTP and gRPC alike
      const field = await httpField();
      expect(field?.circuitBreakers).toEqual(
        expect.arrayContaining([
          { target: 'component:cfg/outbound', policy: 'cfgCB', state: 'open' },
          { target: 'component:locks/outbound', policy: 'lockCB', state: 'open' },
        ]),
      );
      expect(field?.outcomes).toEqual(
        expect.arrayContaining([
          { target: 'component:cfg/outbound', policy: 'quick', outcome: 'timeout', count: 2 },
          { target: 'component:locks/outbound', policy: 'lockCB', outcome: 'circuit-open', count: 1 },
        ]),
      );
      const grpc = await s!.call<{ extended_metadata: Record<string, string> }>('GetMetadata', {});
      expect(JSON.parse(grpc.extended_metadata['rt.resiliency'])).toEqual(field);
    } finally {
      process.kill(redis!.pid, 'SIGCONT');
    }

    // after the breakers' 6 s (long enough that both still read open above beside a CPU load: 2 s
    // did not, at load 16), a trial call goes through and closes each
    await vi.waitFor(async () => expect((await get()).status).toBe(204), { timeout: 20_000, interval: 200 });
    await vi.waitFor(async () => expect((await lock('lock')).body).toBe('{"success":true}'), { timeout: 20_000, interval: 200 });
    expect((await httpField())?.circuitBreakers.filter((b) => b.state !== 'closed')).toEqual([]);
    // the subscription that timed out was not left listening
    expect(s!.sidecar.ctx.services.configuration!.ids()).toEqual([]);
  }, 60_000);

  it.skipIf(!ok)('refuses an attribute named rt.resiliency: the runtime sets that key', async () => {
    const r = await fetch(`${base}/v1.0/metadata/rt.resiliency`, { method: 'PUT', body: 'x' });
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(/set by the runtime/);
  });
});
