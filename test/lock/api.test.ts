/**
 * The distributed lock API of a real sidecar against a real Redis (lock.redis): HTTP
 * `POST /v1.0-alpha1/lock|unlock/<store>` and gRPC TryLockAlpha1 / UnlockAlpha1 (raw and through
 * the @dapr/dapr SDK over both), every unlock status, the errors of each surface, bad bodies
 * answered 400 (a property over bodies), mutual exclusion among many owners racing over HTTP
 * and gRPC on a few resources (a property), and expiry freeing a lock.
 */
import { existsSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { REDIS_BIN, redisMetadata, redisTarget, startRedis } from '../services/redis.ts';
import type { StartedServer } from '../services/server-process.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';

const target = await redisTarget();
const available = requireService('Redis', target.available, `nothing answers at ${target.url} (set RT_TEST_REDIS_URL)`);
const run = `l${process.pid}-${Date.now()}`;
const APP = 'grpc-api'; // the harness's app id: keys are lock||grpc-api||<resource>
/** The SDK's LockStatus (not exported from its index): the reference's enum numbers. */
const LockStatus = { Success: 0, LockDoesNotExist: 1, LockBelongsToOthers: 2 } as const;

interface ErrorBody {
  errorCode: string;
  message: string;
  details: unknown[];
}

describe.skipIf(!available)('the distributed lock API (lock.redis)', () => {
  let s: RuntimeSidecar;
  let redis: Redis;
  let fragile: StartedServer | undefined;
  let base: string;
  let httpSdk: DaprClient;

  beforeAll(async () => {
    const extra = [componentYaml('locks', 'lock.redis', redisMetadata(target)), componentYaml('shared', 'lock.redis', { ...redisMetadata(target), keyPrefix: 'none' })];
    // a store whose Redis the test stops, for the failure answers
    if (existsSync(REDIS_BIN)) {
      fragile = await startRedis();
      extra.push(componentYaml('fragile', 'lock.redis', { redisHost: fragile.url.replace('redis://', '') }));
    }
    s = await startRuntimeSidecar({ extraComponents: extra });
    base = `http://127.0.0.1:${s.sidecar.httpPort}`;
    redis = new Redis(target.url);
    httpSdk = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(s.sidecar.httpPort), communicationProtocol: CommunicationProtocolEnum.HTTP, logger: { level: LogLevel.Error } });
  });
  afterAll(async () => {
    await httpSdk?.stop().catch(() => undefined);
    if (redis) {
      const keys = await redis.keys(`lock||*${run}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
    await s?.stop();
    await fragile?.stop();
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const r = await fetch(base + path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  const lock = (store: string, resourceId: string, lockOwner: string, expiryInSeconds: unknown = 30) => post(`/v1.0-alpha1/lock/${store}`, { resourceId, lockOwner, expiryInSeconds });
  const unlock = (store: string, resourceId: string, lockOwner: string) => post(`/v1.0-alpha1/unlock/${store}`, { resourceId, lockOwner });
  const grpcCode = (e: grpc.ServiceError) => ({ code: e.code, errorCode: e.metadata.get('rt-error-code')[0] });

  it('HTTP: {"success"} for a lock, every reachable unlock status as its number, the key as the reference makes it', async () => {
    const res = `${run}-http`;
    expect(await lock('locks', res, 'alice')).toEqual({ status: 200, json: { success: true } });
    expect(await redis.get(`lock||${APP}||${res}`)).toBe('alice');
    expect(await lock('locks', res, 'bob')).toEqual({ status: 200, json: { success: false } });
    expect(await unlock('locks', res, 'bob')).toEqual({ status: 200, json: { status: 2 } });
    expect(await unlock('locks', res, 'alice')).toEqual({ status: 200, json: { status: 0 } });
    expect(await unlock('locks', res, 'alice')).toEqual({ status: 200, json: { status: 1 } });
    // keyPrefix none: lock||<resource>; the proto's field names and a numeric string are read too
    const shared = `${run}-shared`;
    expect(await post('/v1.0-alpha1/lock/shared', { resource_id: shared, lock_owner: 'carol', expiry_in_seconds: '20' })).toEqual({ status: 200, json: { success: true } });
    expect(await redis.get(`lock||${shared}`)).toBe('carol');
    expect(await redis.ttl(`lock||${shared}`)).toBeGreaterThan(15);
    expect(await unlock('shared', shared, 'carol')).toEqual({ status: 200, json: { status: 0 } });
  });

  it('gRPC: TryLockAlpha1 and UnlockAlpha1 answer success and each status', async () => {
    const res = `${run}-grpc`;
    const req = { store_name: 'locks', resource_id: res, lock_owner: 'alice', expiry_in_seconds: 30 };
    expect(await s.call('TryLockAlpha1', req)).toEqual({ success: true });
    expect(await s.call('TryLockAlpha1', { ...req, lock_owner: 'bob' })).toEqual({ success: false });
    const un = (owner: string) => s.call('UnlockAlpha1', { store_name: 'locks', resource_id: res, lock_owner: owner });
    expect(await un('bob')).toEqual({ status: 2 });
    expect(await un('alice')).toEqual({ status: 0 });
    expect(await un('alice')).toEqual({ status: 1 });
  });

  it('the @dapr/dapr SDK over gRPC and HTTP: lock, unlock and its LockStatus', async () => {
    for (const [name, c] of [
      ['grpc', s.sdk()],
      ['http', httpSdk],
    ] as const) {
      const res = `${run}-sdk-${name}`;
      expect(await c.lock.lock('locks', res, 'alice', 30)).toEqual({ success: true });
      expect(await c.lock.lock('locks', res, 'bob', 30)).toEqual({ success: false });
      expect(await c.lock.unlock('locks', res, 'bob')).toEqual({ status: LockStatus.LockBelongsToOthers });
      expect(await c.lock.unlock('locks', res, 'alice')).toEqual({ status: LockStatus.Success });
      expect(await c.lock.unlock('locks', res, 'alice')).toEqual({ status: LockStatus.LockDoesNotExist });
    }
  });

  it('errors: an unknown store, an empty id or owner, an expiry under 1, a "||" in the id; HTTP 400 and INVALID_ARGUMENT alike', async () => {
    const cases: [string, { resourceId: string; lockOwner: string; expiryInSeconds: number }, string, RegExp][] = [
      ['nostore', { resourceId: 'r', lockOwner: 'o', expiryInSeconds: 5 }, 'ERR_LOCK_STORE_NOT_FOUND', /loaded lock stores: fragile, locks, shared|loaded lock stores: locks, shared/],
      ['mem', { resourceId: 'r', lockOwner: 'o', expiryInSeconds: 5 }, 'ERR_LOCK_STORE_NOT_FOUND', /lock store "mem" is not found/],
      ['locks', { resourceId: '', lockOwner: 'o', expiryInSeconds: 5 }, 'ERR_MALFORMED_REQUEST', /"resourceId" is required/],
      ['locks', { resourceId: 'r', lockOwner: '', expiryInSeconds: 5 }, 'ERR_MALFORMED_REQUEST', /"lockOwner" is required/],
      ['locks', { resourceId: 'r', lockOwner: 'o', expiryInSeconds: 0 }, 'ERR_MALFORMED_REQUEST', /"expiryInSeconds" must be a whole number of seconds from 1/],
      ['locks', { resourceId: 'r', lockOwner: 'o', expiryInSeconds: -3 }, 'ERR_MALFORMED_REQUEST', /"expiryInSeconds"/],
      ['locks', { resourceId: 'a||b', lockOwner: 'o', expiryInSeconds: 5 }, 'ERR_MALFORMED_REQUEST', /must not contain "\|\|"/],
    ];
    for (const [store, body, code, message] of cases) {
      const h = await post(`/v1.0-alpha1/lock/${store}`, body);
      expect(h.status, `${store} ${JSON.stringify(body)}`).toBe(400);
      expect(h.json.errorCode).toBe(code);
      expect(h.json.message).toMatch(message);
      const g = await s.fail('TryLockAlpha1', { store_name: store, resource_id: body.resourceId, lock_owner: body.lockOwner, expiry_in_seconds: body.expiryInSeconds });
      expect(grpcCode(g)).toEqual({ code: grpc.status.INVALID_ARGUMENT, errorCode: code });
      // unlock checks the same, bar the expiry
      if (body.expiryInSeconds > 0) {
        expect((await unlock(store, body.resourceId, body.lockOwner)).json.errorCode).toBe(code);
        expect(grpcCode(await s.fail('UnlockAlpha1', { store_name: store, resource_id: body.resourceId, lock_owner: body.lockOwner }))).toEqual({ code: grpc.status.INVALID_ARGUMENT, errorCode: code });
      }
    }
    // an empty or non-JSON body
    for (const body of ['', 'not json', '[1]', '{"resourceId": 5}', '{"expiryInSeconds": 1.5}', '{"expiryInSeconds": "soon"}']) {
      const h = await post(`/v1.0-alpha1/lock/locks`, body);
      expect(h.status, body).toBe(400);
      expect(h.json.errorCode).toBe('ERR_MALFORMED_REQUEST');
    }
  });

  it.skipIf(!existsSync(REDIS_BIN))("a store that fails: 500 ERR_TRY_LOCK / ERR_UNLOCK over HTTP, INTERNAL over gRPC, the store's reason in the message", async () => {
    const res = `${run}-fragile`;
    expect(await lock('fragile', res, 'alice')).toEqual({ status: 200, json: { success: true } });
    await fragile!.stop();
    const l = await lock('fragile', res, 'alice');
    expect(l.status).toBe(500);
    expect(l.json.errorCode).toBe('ERR_TRY_LOCK');
    expect(l.json.message).toMatch(/failed to try acquiring lock ".*-fragile" in lock store "fragile": /);
    const u = await unlock('fragile', res, 'alice');
    expect(u.status).toBe(500);
    expect(u.json.errorCode).toBe('ERR_UNLOCK');
    expect(grpcCode(await s.fail('UnlockAlpha1', { store_name: 'fragile', resource_id: res, lock_owner: 'alice' }))).toEqual({ code: grpc.status.INTERNAL, errorCode: 'ERR_UNLOCK' });
    fragile = undefined;
  });

  it('a bad body is a 400 with the JSON error shape, never a 5xx; a good one locks (property over bodies)', async () => {
    const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('', 'a||b', '\ud800', 'ok'));
    const expiry = fc.oneof(fc.integer({ min: -5, max: 100 }), fc.constantFrom(0, 1.5, 2 ** 31, '7', ' 9 ', '-1', 'x', '1e3'), fc.constant(null));
    const member = (v: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: v }, { weight: 1, arbitrary: fc.anything() });
    const body = fc.oneof(
      { weight: 4, arbitrary: fc.record({ resourceId: member(text), lockOwner: member(text), expiryInSeconds: member(expiry) }, { requiredKeys: [] }) },
      { weight: 1, arbitrary: fc.anything() },
    );
    let n = 0;
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const tag = `${run}-prop-${n++}`;
        // valid ones get a resource of their own, so they never meet a lock of an earlier run
        const sent = isRecord(b) && typeof b.resourceId === 'string' && b.resourceId !== '' ? { ...b, resourceId: `${tag}${b.resourceId}` } : b;
        const r = await fetch(`${base}/v1.0-alpha1/lock/locks`, { method: 'POST', body: JSON.stringify(sent) ?? '' });
        const json = (await r.json()) as Record<string, unknown>;
        if (valid(sent)) {
          expect(r.status, JSON.stringify(sent)).toBe(200);
          expect(json).toEqual({ success: true });
          await unlock('locks', (sent as { resourceId: string }).resourceId, (sent as { lockOwner: string }).lockOwner);
        } else {
          expect(r.status, JSON.stringify(sent)).toBe(400);
          const e = json as unknown as ErrorBody;
          expect(e.errorCode).toBe('ERR_MALFORMED_REQUEST');
          expect(typeof e.message).toBe('string');
          expect(Array.isArray(e.details)).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('mutual exclusion: many owners racing over HTTP and gRPC on a few resources never hold one at once, and only the holder releases (property)', async () => {
    const scenario = fc.record({
      owners: fc.integer({ min: 2, max: 10 }),
      resources: fc.integer({ min: 1, max: 3 }),
      attempts: fc.integer({ min: 3, max: 8 }),
      seed: fc.integer(),
    });
    let round = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ owners, resources, attempts, seed }) => {
        const r = round++;
        const holders = new Map<number, string>();
        let acquired = 0;
        let rng = seed >>> 0;
        const next = (m: number) => {
          rng = (Math.imul(rng, 1103515245) + 12345) >>> 0;
          return rng % m;
        };
        const res = (i: number) => `${run}-race-${r}-${i}`;
        const tryLock = (i: number, owner: string, overGrpc: boolean): Promise<boolean> =>
          overGrpc
            ? s.call<{ success: boolean }>('TryLockAlpha1', { store_name: 'locks', resource_id: res(i), lock_owner: owner, expiry_in_seconds: 60 }).then((x) => x.success)
            : lock('locks', res(i), owner, 60).then((x) => x.json.success === true);
        const release = (i: number, owner: string, overGrpc: boolean): Promise<number> =>
          overGrpc
            ? s.call<{ status: number }>('UnlockAlpha1', { store_name: 'locks', resource_id: res(i), lock_owner: owner }).then((x) => x.status)
            : unlock('locks', res(i), owner).then((x) => x.json.status as number);
        await Promise.all(
          Array.from({ length: owners }, async (_, o) => {
            const owner = `owner-${r}-${o}`;
            const overGrpc = o % 2 === 1;
            for (let a = 0; a < attempts; a++) {
              const i = next(resources);
              if (!(await tryLock(i, owner, overGrpc))) {
                // someone holds it: a release by us must not free it
                const st = await release(i, owner, overGrpc);
                expect([1, 2]).toContain(st);
                continue;
              }
              expect(holders.get(i), `resource ${i} taken by ${owner} while ${holders.get(i)} holds it`).toBeUndefined();
              holders.set(i, owner);
              acquired++;
              await new Promise((done) => setTimeout(done, next(3)));
              holders.delete(i);
              expect(await release(i, owner, overGrpc)).toBe(0);
            }
          }),
        );
        expect(acquired).toBeGreaterThan(0);
        // every lock was released by its holder: nothing is left
        for (let i = 0; i < resources; i++) expect(await redis.exists(`lock||${APP}||${res(i)}`)).toBe(0);
      }),
      { numRuns: 12 },
    );
  });

  it('expiry frees a lock: another owner takes it once it passes, and the first owner can no longer release it', async () => {
    const res = `${run}-expiry`;
    expect((await lock('locks', res, 'alice', 1)).json).toEqual({ success: true });
    expect((await lock('locks', res, 'bob', 1)).json).toEqual({ success: false });
    const deadline = Date.now() + 5000;
    let taken = false;
    while (!taken && Date.now() < deadline) {
      taken = (await lock('locks', res, 'bob', 30)).json.success === true;
      if (!taken) await new Promise((r) => setTimeout(r, 50));
    }
    expect(taken).toBe(true);
    expect((await unlock('locks', res, 'alice')).json).toEqual({ status: 2 });
    expect((await unlock('locks', res, 'bob')).json).toEqual({ status: 0 });
  });

  it('the metadata API lists the lock stores like other components', async () => {
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string; type: string; version: string }[] };
    expect(md.components).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'locks', type: 'lock.redis', version: 'v1' })]));
  });
});

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What the API takes: an object whose id and owner are non-empty text and expiry a whole number from 1 (or its decimal text). */
function valid(b: unknown): boolean {
  if (!isRecord(b)) return false;
  const { resourceId, lockOwner, expiryInSeconds: e } = b;
  if (typeof resourceId !== 'string' || typeof lockOwner !== 'string' || !resourceId || !lockOwner) return false;
  if (resourceId.includes('||') || !resourceId.isWellFormed() || !lockOwner.isWellFormed()) return false;
  const n = typeof e === 'number' ? e : typeof e === 'string' && /^\s*-?\d{1,12}\s*$/.test(e) ? Number(e) : Number.NaN;
  return Number.isInteger(n) && n >= 1 && n <= 2_147_483_647;
}
