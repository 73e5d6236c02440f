/**
 * The actor runtime on one host: a real sidecar (startSidecar, embedded scheduler on its data
 * dir), an app hosting actor types (app.ts), actor state on a real Redis, raw HTTP and gRPC.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { componentYaml } from '../grpc/harness.ts';
import { eventually, redisClient } from '../configuration/helpers.ts';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { dropActorKeys, startActorApp, type ActorTestApp } from './app.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const DB = 12;

const CONFIG = {
  entities: ['Counter', 'Reentrant'],
  actorIdleTimeout: '1s',
  actorScanInterval: '100ms',
  entitiesConfig: [{ entities: ['Reentrant'], reentrancy: { enabled: true, maxStackDepth: 4 } }],
};

let dir: string;
let app: ActorTestApp;
let sc: Sidecar;
let base: string;
const appId = `actors-${randomUUID().slice(0, 8)}`;

async function start(): Promise<Sidecar> {
  const s = await startSidecar({ appId, appPort: app.port, httpPort: 0, grpcPort: 0, metricsPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [join(dir, 'resources')], logger: pino({ level: 'silent' }) });
  app.sidecarPort = s.httpPort;
  base = `http://127.0.0.1:${s.httpPort}`;
  // the app's types are known once the metadata lists them
  for (let i = 0; i < 200; i++) {
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { actors: { type: string }[] };
    if (md.actors.some((a) => a.type === 'Counter')) return s;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the sidecar never learnt the app actor types');
}

beforeAll(async () => {
  if (!haveRedis) return;
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-'));
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'store.yaml'), componentYaml('actorstore', 'state.redis', { ...redisMetadata(redis), redisDB: String(DB), actorStateStore: 'true' }));
  // actor state calls run under the store's outbound policy (counted in /v1.0/metadata)
  await writeFile(
    join(dir, 'resources', 'resiliency.yaml'),
    'apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata:\n  name: actorstate\nspec:\n  policies:\n    retries:\n      twice: { policy: constant, duration: 10ms, maxRetries: 2 }\n  targets:\n    components:\n      actorstore:\n        outbound: { retry: twice }\n',
  );
  app = await startActorApp(CONFIG);
  sc = await start();
});

afterAll(async () => {
  await sc?.close();
  await app?.close();
  if (haveRedis) await dropActorKeys(redis, DB, appId);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A raw gRPC client of the runtime API on the sidecar: rpc(method, request). */
function grpcApi() {
  const Client = runtimeClient();
  const client = new Client(`127.0.0.1:${sc.grpcPort}`, grpc.credentials.createInsecure());
  const rpc = <T>(method: string, req: unknown) =>
    new Promise<T>((resolve, reject) => (client as unknown as Record<string, (r: unknown, cb: (e: grpc.ServiceError | null, r: T) => void) => void>)[method]!.call(client, req, (e, r) => (e ? reject(e) : resolve(r))));
  return { rpc, close: () => client.close() };
}

const call = (type: string, id: string, method: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}/v1.0/actors/${type}/${id}/method/${method}`, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });

describe.runIf(haveRedis)('actors on one host', () => {
  it("runs actor state calls under the actor state store's outbound resiliency policy", async () => {
    const id = randomUUID();
    const successes = async () => {
      const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { resiliency?: { outcomes: { target: string; policy: string; outcome: string; count: number }[] } };
      return md.resiliency?.outcomes.find((o) => o.target === 'component:actorstore/outbound' && o.outcome === 'success' && o.policy === 'twice')?.count ?? 0;
    };
    const before = await successes();
    const put = await fetch(`${base}/v1.0/actors/Counter/${id}/state`, { method: 'POST', body: JSON.stringify([{ operation: 'upsert', request: { key: 'k', value: 1 } }]) });
    expect(put.status).toBe(204);
    expect((await fetch(`${base}/v1.0/actors/Counter/${id}/state/k`)).status).toBe(200);
    expect(await successes()).toBe(before + 2);
  });

  it('invokes a method with any verb and gives back the app answer as it gave it', async () => {
    const id = randomUUID();
    for (const method of ['POST', 'PUT', 'GET', 'DELETE']) {
      const r = await fetch(`${base}/v1.0/actors/Counter/${id}/method/echo`, { method, body: method === 'GET' ? undefined : 'hello', headers: { 'content-type': 'text/plain' } });
      expect(r.status, method).toBe(200);
      if (method !== 'GET') expect(await r.text()).toBe('hello');
    }
    const failed = await call('Counter', id, 'fail');
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({ error: 'the actor failed' });
    expect(app.log.calls.filter((c) => c.id === id)).toHaveLength(5);
  });

  it('keeps a counter in actor state under the reference key layout, on Redis', async () => {
    const id = randomUUID();
    for (let i = 1; i <= 3; i++) expect(await (await call('Counter', id, 'count')).json()).toBe(i);
    const got = await fetch(`${base}/v1.0/actors/Counter/${id}/state/n`);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('3');
    expect((await fetch(`${base}/v1.0/actors/Counter/${id}/state/none`)).status).toBe(204);
    // the raw store: <appId>||<type>||<id>||<key>, the value's JSON text
    const r = await redisClient(redis, DB);
    try {
      expect((await r.hget(`${appId}||Counter||${id}||n`, 'data'))).toBe('3');
    } finally {
      r.disconnect();
    }
    // delete through a transaction
    const del = await fetch(`${base}/v1.0/actors/Counter/${id}/state`, { method: 'POST', body: JSON.stringify([{ operation: 'delete', request: { key: 'n' } }]) });
    expect(del.status).toBe(204);
    expect((await fetch(`${base}/v1.0/actors/Counter/${id}/state/n`)).status).toBe(204);
  });

  it('runs one call of an actor at a time, and calls of different actors side by side', async () => {
    const id = randomUUID();
    const before = app.log.overlaps;
    const t0 = Date.now();
    const rs = await Promise.all(Array.from({ length: 10 }, () => call('Counter', id, 'slow')));
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(10 * 30 - 5);
    expect(app.log.overlaps).toBe(before);
    // different actors: the app has several of them in at once
    app.log.maxInFlight = 0;
    await Promise.all(Array.from({ length: 10 }, () => call('Counter', randomUUID(), 'slow')));
    expect(app.log.maxInFlight).toBeGreaterThan(1);
  });

  it('lets a reentrant chain back into its actor, up to the maximum stack depth', async () => {
    const id = randomUUID();
    const ok = await call('Reentrant', id, 'recurse', { n: 3 });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toBe(4);
    const chain = app.log.calls.filter((c) => c.id === id).map((c) => c.reentrancyId);
    expect(new Set(chain).size).toBe(1);
    expect(chain[0]).toBeTruthy();
    // depth 5 > maxStackDepth 4: the innermost call is refused, and the chain fails
    const deep = await call('Reentrant', id, 'recurse', { n: 4 });
    expect(deep.status).toBe(500);
    expect(((await deep.json()) as { errorCode: string }).errorCode).toBe('ERR_ACTOR_STACK_DEPTH');
    // an actor without reentrancy waits for itself: the nested call never gets in (bounded here by the test)
  });

  it('fires timers while the actor is active and drops them when it is deactivated idle (DELETE to the app)', async () => {
    const id = randomUUID();
    expect((await call('Counter', id, 'echo', 1)).status).toBe(200);
    const t = await fetch(`${base}/v1.0/actors/Counter/${id}/timers/tick`, { method: 'POST', body: JSON.stringify({ dueTime: '0s', period: '1500ms', data: { x: 1 }, callback: 'onTick' }) });
    expect(t.status).toBe(204);
    await eventually(() => app.log.timers.some((x) => x.id === id), 'the first timer fire');
    expect(app.log.timers.find((x) => x.id === id)!.body).toEqual({ data: { x: 1 }, callback: 'onTick', dueTime: '0s', period: '1500ms' });
    // idle 1 s after the fire (timer fires count as use), before the second fire at 1.5 s
    await eventually(() => app.log.deactivated.some((d) => d.id === id), 'the deactivation', 4000);
    const fires = app.log.timers.filter((x) => x.id === id).length;
    await new Promise((r) => setTimeout(r, 1700));
    expect(app.log.timers.filter((x) => x.id === id).length).toBe(fires);
    // a timer for an actor that is not active is refused
    const refused = await fetch(`${base}/v1.0/actors/Counter/${id}/timers/tick`, { method: 'POST', body: JSON.stringify({ dueTime: '1s' }) });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { errorCode: string }).errorCode).toBe('ERR_ACTOR_TIMER_CREATE');
  });

  it('lists the active actors per type in the metadata', async () => {
    const id = randomUUID();
    await call('Reentrant', id, 'echo', 1);
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { actors: { type: string; count: number }[] };
    expect(md.actors.find((a) => a.type === 'Reentrant')!.count).toBeGreaterThanOrEqual(1);
  });

  it('serves the same operations over gRPC', async () => {
    const { rpc, close } = grpcApi();
    try {
      const id = randomUUID();
      const res = await rpc<{ data: Buffer }>('InvokeActor', { actor_type: 'Counter', actor_id: id, method: 'echo', data: Buffer.from('{"a":1}') });
      expect(JSON.parse(res.data.toString())).toEqual({ a: 1 });
      await rpc('ExecuteActorStateTransaction', { actor_type: 'Counter', actor_id: id, operations: [{ operationType: 'upsert', key: 'k', value: { type_url: '', value: Buffer.from('"v"') } }] });
      const st = await rpc<{ data: Buffer }>('GetActorState', { actor_type: 'Counter', actor_id: id, key: 'k' });
      expect(st.data.toString()).toBe('"v"');
      const missing = await rpc('GetActorState', { actor_type: 'Nope', actor_id: id, key: 'k' }).catch((e: grpc.ServiceError) => e);
      expect((missing as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
      // a timer needs an active actor, and this app deactivates after 1 s idle: on a loaded machine
      // the calls above can outlast that, so the actor is called again until the timer is taken
      for (let attempt = 1; ; attempt++) {
        await rpc('InvokeActor', { actor_type: 'Counter', actor_id: id, method: 'echo', data: Buffer.from('{}') });
        const e = await rpc('RegisterActorTimer', { actor_type: 'Counter', actor_id: id, name: 'g', due_time: '0s', period: '', callback: 'cb', data: Buffer.from('"d"') }).then(
          () => undefined,
          (x: grpc.ServiceError) => x,
        );
        if (!e) break;
        if (!/not active/.test(e.details) || attempt === 5) throw e;
      }
      await eventually(() => app.log.timers.some((x) => x.id === id && x.name === 'g'), 'the gRPC timer');
      await rpc('UnregisterActorTimer', { actor_type: 'Counter', actor_id: id, name: 'g' });
    } finally {
      close();
    }
  });
});

describe.runIf(haveRedis)('actor reminders', () => {
  it('fires a reminder through the actor, and again after a sidecar restart', async () => {
    const id = randomUUID();
    const put = await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/r1`, { method: 'POST', body: JSON.stringify({ dueTime: '200ms', period: '1s', data: { hello: 'world' } }) });
    expect(put.status).toBe(204);
    const got = (await (await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/r1`)).json()) as Record<string, unknown>;
    expect(got).toMatchObject({ actorType: 'Counter', actorID: id, dueTime: '200ms', period: '1s', data: { hello: 'world' } });
    await eventually(() => app.log.reminders.some((x) => x.id === id), 'the first reminder fire');
    expect(app.log.reminders.find((x) => x.id === id)!.body).toEqual({ data: { hello: 'world' }, dueTime: '200ms', period: '1s' });
    await sc.close();
    const fires = app.log.reminders.filter((x) => x.id === id).length;
    sc = await start();
    await eventually(() => app.log.reminders.filter((x) => x.id === id).length > fires, 'a fire after the restart', 5000);
    expect((await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/r1`, { method: 'DELETE' })).status).toBe(204);
    const gone = await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/r1`);
    expect(gone.status).toBe(404);
    // the reference's answer (dapr/dapr pkg/api/universal/actors.go GetActorReminder: ErrActorReminderNotFound)
    expect(await gone.json()).toMatchObject({ errorCode: 'ERR_ACTOR_REMINDER_NOT_FOUND', message: 'actor reminder not found: r1' });
  });

  it('lists and removes reminders by type over gRPC', async () => {
    const { rpc, close } = grpcApi();
    try {
      const [a, b] = [randomUUID(), randomUUID()];
      for (const [id, name] of [[a, 'x'], [a, 'y'], [b, 'z']] as const) await rpc('RegisterActorReminder', { actor_type: 'Reentrant', actor_id: id, name, due_time: '1h', period: '', ttl: '', data: Buffer.from('{"k":1}') });
      type Listed = { reminders: { name: string; reminder: { actor_id: string; due_time: string; data: { value: Buffer } } }[] };
      const all = await rpc<Listed>('ListActorReminders', { actor_type: 'Reentrant' });
      expect(all.reminders.map((r) => r.name).sort()).toEqual(['x', 'y', 'z']);
      expect(JSON.parse(all.reminders[0]!.reminder.data.value.toString())).toEqual({ k: 1 });
      const ofA = await rpc<Listed>('ListActorReminders', { actor_type: 'Reentrant', actor_id: a });
      expect(ofA.reminders.map((r) => r.name).sort()).toEqual(['x', 'y']);
      await rpc('UnregisterActorRemindersByType', { actor_type: 'Reentrant', actor_id: a });
      expect((await rpc<Listed>('ListActorReminders', { actor_type: 'Reentrant' })).reminders.map((r) => r.name)).toEqual(['z']);
      await rpc('UnregisterActorRemindersByType', { actor_type: 'Reentrant' });
      expect((await rpc<Listed>('ListActorReminders', { actor_type: 'Reentrant' })).reminders).toEqual([]);
    } finally {
      close();
    }
  });

  it('refuses schedules that do not parse with a 400 naming the field', async () => {
    const id = randomUUID();
    for (const [body, word] of [
      [{ dueTime: 'soon' }, 'dueTime'],
      [{ period: 'R0/PT1S' }, 'period'],
      [{ period: '-1s' }, 'period'],
      [{ dueTime: '10s', ttl: '5s' }, 'ttl'],
    ] as const) {
      const r = await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/bad`, { method: 'POST', body: JSON.stringify(body) });
      expect(r.status, JSON.stringify(body)).toBe(400);
      const e = (await r.json()) as { errorCode: string; message: string };
      expect(e.errorCode).toBe('ERR_ACTOR_REMINDER_CREATE');
      expect(e.message).toContain(word);
    }
  });
});

describe.runIf(haveRedis)('shutdown', () => {
  it('ends the actors, and a call that hangs in the app does not hold the stop', async () => {
    const id = randomUUID();
    expect((await call('Counter', id, 'echo', 1)).status).toBe(200);
    const hung = call('Counter', randomUUID(), 'hang').catch(() => undefined);
    await eventually(() => app.log.calls.some((c) => c.method === 'hang'), 'the hanging call');
    const t0 = Date.now();
    try {
      await sc.close();
      // the HTTP server's grace for the hung request (5 s), then the actors' drain (5 s at most)
      expect(Date.now() - t0).toBeLessThan(14_000);
      expect(app.log.deactivated.some((d) => d.id === id)).toBe(true);
      await hung;
    } finally {
      sc = await start();
    }
  }, 40_000);
});

describe.runIf(haveRedis)('bad input', () => {
  const grpcCall = async (method: string, req: unknown): Promise<{ code: string; status: number }> => {
    const { rpc, close } = grpcApi();
    try {
      await rpc(method, req);
      return { code: '', status: 0 };
    } catch (e) {
      const se = e as grpc.ServiceError;
      return { code: String(se.metadata.get('rt-error-code')[0] ?? ''), status: se.code };
    } finally {
      close();
    }
  };

  it('answers alike over HTTP and gRPC, with the rows of the error table', async () => {
    const id = randomUUID();
    await call('Counter', id, 'echo', 1);
    const cases: [RequestInit & { path: string }, string, unknown, string, number, number][] = [
      [{ path: `/v1.0/actors/Nope/${id}/method/m`, method: 'POST' }, 'InvokeActor', { actor_type: 'Nope', actor_id: id, method: 'm' }, 'ERR_ACTOR_INVOKE_METHOD', 500, grpc.status.INTERNAL],
      [{ path: `/v1.0/actors/Nope/${id}/state/k`, method: 'GET' }, 'GetActorState', { actor_type: 'Nope', actor_id: id, key: 'k' }, 'ERR_ACTOR_INSTANCE_MISSING', 400, grpc.status.INVALID_ARGUMENT],
      [{ path: `/v1.0/actors/Counter/${id}/state`, method: 'POST', body: JSON.stringify([{ operation: 'merge', request: { key: 'k' } }]) }, 'ExecuteActorStateTransaction', { actor_type: 'Counter', actor_id: id, operations: [{ operationType: 'merge', key: 'k' }] }, 'ERR_MALFORMED_REQUEST', 400, grpc.status.INVALID_ARGUMENT],
      [{ path: `/v1.0/actors/Counter/${id}/timers/t`, method: 'POST', body: JSON.stringify({ period: 'often' }) }, 'RegisterActorTimer', { actor_type: 'Counter', actor_id: id, name: 't', period: 'often' }, 'ERR_ACTOR_TIMER_CREATE', 400, grpc.status.INVALID_ARGUMENT],
      [{ path: `/v1.0/actors/Counter/${id}/reminders/r`, method: 'POST', body: JSON.stringify({ dueTime: 'later' }) }, 'RegisterActorReminder', { actor_type: 'Counter', actor_id: id, name: 'r', due_time: 'later' }, 'ERR_ACTOR_REMINDER_CREATE', 400, grpc.status.INVALID_ARGUMENT],
      [{ path: `/v1.0/actors/Counter/${id}/reminders/none`, method: 'GET' }, 'GetActorReminder', { actor_type: 'Counter', actor_id: id, name: 'none' }, 'ERR_ACTOR_REMINDER_NOT_FOUND', 404, grpc.status.NOT_FOUND],
    ];
    for (const [req, method, msg, code, httpStatus, grpcStatus] of cases) {
      const r = await fetch(base + req.path, req);
      const body = (await r.json()) as { errorCode: string; message: string };
      expect({ method, status: r.status, code: body.errorCode }).toEqual({ method, status: httpStatus, code });
      expect(body.message.length).toBeGreaterThan(10);
      expect({ method, ...(await grpcCall(method, msg)) }).toEqual({ method, code, status: grpcStatus });
    }
  });

  it('a method call with a bad path or verb is a 4xx JSON error, never reaching the app', async () => {
    const before = app.log.calls.length;
    const bad = await fetch(`${base}/v1.0/actors/Counter/%E0%A4%A/method/echo`, { method: 'POST', body: '1' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    const patch = await fetch(`${base}/v1.0/actors/Counter/x/method/echo`, { method: 'PATCH', body: '1' });
    expect(patch.status).toBe(405);
    expect(((await patch.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    expect(app.log.calls.length).toBe(before);
  });

  it('property: any body to the state, timer and reminder routes gives 204 or a 4xx JSON error', async () => {
    const fc = await import('fast-check');
    const id = randomUUID();
    await call('Counter', id, 'echo', 1);
    const bodies = fc.oneof(
      fc.json(),
      fc.string(),
      fc.array(fc.record({ operation: fc.constantFrom('upsert', 'delete', 'UPSERT', 'x'), request: fc.record({ key: fc.string(), value: fc.jsonValue() }, { requiredKeys: [] }) }, { requiredKeys: [] })).map((o) => JSON.stringify(o)),
      fc.record({ dueTime: fc.oneof(fc.string(), fc.constantFrom('1s', 'PT1S', '2020-01-01T00:00:00Z', '-1s', '0')), period: fc.oneof(fc.string(), fc.constantFrom('R2/PT1S', '1h', 'R/PT1S', 'P')), ttl: fc.oneof(fc.string(), fc.constantFrom('10m', 'PT0S')), data: fc.jsonValue() }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
    );
    const route = fc.constantFrom('state', 'timers/p', 'reminders/p');
    await fc.assert(
      fc.asyncProperty(route, bodies, async (path, body) => {
        const r = await fetch(`${base}/v1.0/actors/Counter/${id}/${path}`, { method: 'POST', body });
        if (r.status === 204) return;
        expect(r.status, `${path} ${body}`).toBeGreaterThanOrEqual(400);
        expect(r.status, `${path} ${body}`).toBeLessThan(500);
        expect(((await r.json()) as { errorCode: string }).errorCode).toMatch(/^ERR_/);
      }),
      { numRuns: 60 },
    );
    await fetch(`${base}/v1.0/actors/Counter/${id}/reminders/p`, { method: 'DELETE' });
  });
});
