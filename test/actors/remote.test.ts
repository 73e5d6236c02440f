/**
 * Actors across hosts: one placement service (in-process, on loopback) and two hosts of the same
 * app and actor types, each its own process (remote-host.ts: the actor test app and a sidecar
 * started with the placement address), actor state on a real Redis. Calls through either sidecar
 * reach the one host placement gives each actor; state, timers, reentrancy ids and the app's
 * answers cross the forward unchanged; a host killed with SIGKILL has its actors moved to the
 * other within the heartbeat timeout, and calls go on.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { componentYaml } from '../grpc/harness.ts';
import { redisClient } from '../configuration/helpers.ts';
import { startPlacement, type RunningPlacement } from '../placement/harness.ts';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { dropActorKeys } from './app.ts';
import { startHost, untilShared, type Host } from './hosts.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const DB = 12;
const HEARTBEAT_TIMEOUT_MS = 2000;
/** RT_ACTOR_TURN_TIMEOUT of both hosts: how long a cycle without reentrancy waits for itself. */
const TURN_WAIT_MS = 3000;

const CONFIG = {
  entities: ['Counter', 'Reentrant'],
  actorIdleTimeout: '1h',
  actorScanInterval: '1s',
  // a moved actor's call in flight is not waited for long (the suite kills hosts)
  drainOngoingCallTimeout: '2s',
  entitiesConfig: [{ entities: ['Reentrant'], reentrancy: { enabled: true, maxStackDepth: 4 } }],
};

let dir: string;
let placement: RunningPlacement;
const hosts: Host[] = [];
let a: Host;
let b: Host;
const appId = `remote-${randomUUID().slice(0, 8)}`;

const call = (h: Host, type: string, id: string, method: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${h.base}/v1.0/actors/${type}/${id}/method/${method}`, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });

/** Which host's app got calls of the actor: the names, one per app that did. */
async function servedBy(type: string, id: string): Promise<string[]> {
  const out: string[] = [];
  for (const h of hosts) if (h.proc.exitCode === null && h.proc.signalCode === null && (await h.log()).calls.some((c) => c.type === type && c.id === id)) out.push(h.name);
  return out;
}

/** An actor id that placement gives to `owner` (found by calling echo through it and asking the apps). */
async function idOn(owner: Host, prefix: string, type = 'Counter'): Promise<string> {
  for (let i = 0; i < 64; i++) {
    const id = `${prefix}-${i}`;
    expect((await call(owner, type, id, 'echo', 'x')).status).toBe(200);
    const by = await servedBy(type, id);
    if (by.length === 1 && by[0] === owner.name) return id;
  }
  throw new Error(`no actor landed on ${owner.name}`);
}

beforeAll(async () => {
  if (!haveRedis) return;
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-remote-'));
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'store.yaml'), componentYaml('actorstore', 'state.redis', { ...redisMetadata(redis), redisDB: String(DB), actorStateStore: 'true' }));
  placement = await startPlacement({ heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
  const settings = (n: string) => ({ appId, placement: [placement.address], resourcesPath: join(dir, 'resources'), dataDir: join(dir, `data-${n}`), config: CONFIG });
  const env = { RT_ACTOR_TURN_TIMEOUT: `${TURN_WAIT_MS}ms` };
  [a, b] = await Promise.all([startHost('a', settings('a'), env), startHost('b', settings('b'), env)]);
  hosts.push(a, b);
  // both are in the table once calls through one reach both apps
  await untilShared(a, [a, b]);
}, 120_000);

afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  await placement?.close();
  if (haveRedis) await dropActorKeys(redis, DB, appId);
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe.runIf(haveRedis)('actors on two hosts with placement', () => {
  it('calls through either sidecar reach one activation per actor, and counters in state add up', async () => {
    const ids = Array.from({ length: 24 }, (_, i) => `count-${i}`);
    // each actor is called 3 times through a and 3 times through b, interleaved, all at once
    await Promise.all(
      ids.map(async (id) => {
        for (let k = 0; k < 6; k++) {
          const r = await call(k % 2 === 0 ? a : b, 'Counter', id, 'count');
          expect(r.status, await r.clone().text()).toBe(200);
        }
      }),
    );
    const [la, lb] = await Promise.all([a.log(), b.log()]);
    let onA = 0;
    for (const id of ids) {
      const inA = la.calls.filter((c) => c.id === id).length;
      const inB = lb.calls.filter((c) => c.id === id).length;
      // one host's app got all six calls: one activation, never two
      expect([inA, inB].sort(), id).toEqual([0, 6]);
      if (inA) onA++;
      // the counter read through either sidecar
      for (const h of [a, b]) expect(await (await fetch(`${h.base}/v1.0/actors/Counter/${id}/state/n`)).text()).toBe('6');
    }
    // consistent hashing spreads 24 actors over both hosts
    expect(onA).toBeGreaterThan(0);
    expect(onA).toBeLessThan(ids.length);
    expect(la.overlaps + lb.overlaps).toBe(0);
  });

  it('state written through one sidecar reads through the other; the app answer crosses unchanged', async () => {
    const id = await idOn(b, 'state');
    const put = await fetch(`${a.base}/v1.0/actors/Counter/${id}/state`, { method: 'POST', body: JSON.stringify([{ operation: 'upsert', request: { key: 'k', value: { deep: [1, 'two'] } } }]) });
    expect(put.status).toBe(204);
    for (const h of [a, b]) {
      const got = await fetch(`${h.base}/v1.0/actors/Counter/${id}/state/k`);
      expect(got.status).toBe(200);
      expect(await got.json()).toEqual({ deep: [1, 'two'] });
      expect((await fetch(`${h.base}/v1.0/actors/Counter/${id}/state/none`)).status).toBe(204);
    }
    // the raw store has it once, under the app's key layout
    const r = await redisClient(redis, DB);
    try {
      expect(await r.hget(`${appId}||Counter||${id}||k`, 'data')).toBe('{"deep":[1,"two"]}');
    } finally {
      r.disconnect();
    }
    // the app's status, content type and body, as it gave them, through the sidecar that is not the host
    const echo = await fetch(`${a.base}/v1.0/actors/Counter/${id}/method/echo`, { method: 'PUT', body: 'plain bytes \u00e9', headers: { 'content-type': 'text/x-custom' } });
    expect(echo.status).toBe(200);
    expect(echo.headers.get('content-type')).toBe('text/x-custom');
    expect(await echo.text()).toBe('plain bytes \u00e9');
    const failed = await call(a, 'Counter', id, 'fail');
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({ error: 'the actor failed' });
    // a malformed transaction is refused by the sidecar called, 400 with its code
    const bad = await fetch(`${a.base}/v1.0/actors/Counter/${id}/state`, { method: 'POST', body: JSON.stringify([{ operation: 'merge', request: { key: 'k' } }]) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
  });

  it('carries the reentrancy id across the forward, and the stack depth limit holds', async () => {
    const id = `re-${randomUUID().slice(0, 8)}`;
    // find which host has it, then call through the other
    expect((await call(a, 'Reentrant', id, 'echo', 1)).status).toBe(200);
    const owner = (await servedBy('Reentrant', id))[0] === 'a' ? a : b;
    const other = owner === a ? b : a;
    const r = await call(other, 'Reentrant', id, 'echo', 2, { 'dapr-reentrancy-id': 'chain-from-outside' });
    expect(r.status).toBe(200);
    const calls = (await owner.log()).calls.filter((c) => c.id === id);
    expect(calls.at(-1)!.reentrancyId).toBe('chain-from-outside');
    // the actor calls itself through its own sidecar within the chain: depth 4 goes, 5 is refused
    const ok = await call(other, 'Reentrant', id, 'recurse', { n: 3 });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toBe(4);
    const deep = await call(other, 'Reentrant', id, 'recurse', { n: 4 });
    expect(deep.status).toBe(500);
    expect(JSON.stringify(await deep.json())).toContain('maximum stack depth exceeded');
  });

  it('a chain X → Y → X over two hosts enters X again with reentrancy; the depth counts across hosts; without reentrancy it is refused after the turn wait', async () => {
    const x = await idOn(a, 'cycle-x', 'Reentrant');
    const y = await idOn(b, 'cycle-y', 'Reentrant');
    // the body of the call of chain[i], each one calling the next through its own sidecar; the last echoes
    const link = (type: string, chain: string[], i: number): unknown => (i === chain.length - 1 ? { type, id: chain[i], method: 'echo', body: 'end' } : { type, id: chain[i], method: 'call', body: link(type, chain, i + 1) });
    const loop = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? x : y));
    const xCalls = async () => (await a.log()).calls.filter((c) => c.id === x);
    const before = (await xCalls()).length;
    // X (at a) → Y (at b, forwarded) → X (forwarded back to a): the nested call enters X while X's first call holds its turn
    const r = await call(a, 'Reentrant', x, 'call', link('Reentrant', [x, y, x], 1));
    expect(r.status, await r.clone().text()).toBe(200);
    expect(await r.json()).toBe('end');
    const [outer, inner] = (await xCalls()).slice(before);
    expect([outer!.method, inner!.method]).toEqual(['call', 'echo']);
    expect(inner!.reentrancyId).toBeTruthy();
    expect(inner!.reentrancyId).toBe(outer!.reentrancyId);
    expect((await b.log()).calls.filter((c) => c.id === y).at(-1)!.reentrancyId).toBe(outer!.reentrancyId);
    // maxStackDepth 4: X four times in one chain goes (through either sidecar), a fifth is refused at X's host
    for (const via of [a, b]) {
      const ok = await call(via, 'Reentrant', x, 'call', link('Reentrant', loop(8), 1));
      expect(ok.status, await ok.clone().text()).toBe(200);
    }
    const deep = await call(b, 'Reentrant', x, 'call', link('Reentrant', loop(9), 1));
    expect(deep.status).toBe(500);
    expect(JSON.stringify(await deep.json())).toContain('maximum stack depth exceeded');

    // Counter has no reentrancy: the nested call waits for X's own turn, and gives up after the turn wait
    const cx = await idOn(a, 'cycle-cx');
    const cy = await idOn(b, 'cycle-cy');
    const echoes = async () => (await a.log()).calls.filter((c) => c.id === cx && c.method === 'echo').length;
    const echoed = await echoes();
    const started = Date.now();
    const stuck = await call(a, 'Counter', cx, 'call', link('Counter', [cx, cy, cx], 1));
    const took = Date.now() - started;
    expect(stuck.status).toBe(500);
    const why = (await stuck.json()) as { errorCode: string; message: string };
    expect(why.errorCode).toBe('ERR_ACTOR_INVOKE_METHOD');
    expect(why.message).toContain(`did not come within ${TURN_WAIT_MS} ms`);
    expect(took).toBeGreaterThanOrEqual(TURN_WAIT_MS - 50);
    expect(took).toBeLessThan(TURN_WAIT_MS + 5000);
    // the call that gave up never reaches the app later, and X takes calls again
    expect((await call(a, 'Counter', cx, 'echo', 'after')).status).toBe(200);
    expect(await echoes()).toBe(echoed + 1);
  });

  it('gRPC InvokeActor and timers through the sidecar that is not the host', async () => {
    const id = await idOn(b, 'grpc');
    const Client = runtimeClient();
    const client = new Client(`127.0.0.1:${a.grpc}`, grpc.credentials.createInsecure());
    try {
      const res = await new Promise<{ data: Buffer }>((resolve, reject) =>
        (client as unknown as { InvokeActor(r: unknown, cb: (e: grpc.ServiceError | null, r: { data: Buffer }) => void): void }).InvokeActor({ actor_type: 'Counter', actor_id: id, method: 'echo', data: Buffer.from('over grpc') }, (e, r) => (e ? reject(e) : resolve(r))),
      );
      expect(Buffer.from(res.data).toString()).toBe('over grpc');
    } finally {
      client.close();
    }
    const t = await fetch(`${a.base}/v1.0/actors/Counter/${id}/timers/tick`, { method: 'POST', body: JSON.stringify({ dueTime: '0s', period: '100ms', data: 'tock' }) });
    expect(t.status).toBe(204);
    const end = Date.now() + 10_000;
    while ((await b.log()).timers.filter((x) => x.id === id).length < 2) {
      if (Date.now() > end) throw new Error('the timer never fired at its host');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await a.log()).timers.some((x) => x.id === id)).toBe(false);
    expect((await fetch(`${a.base}/v1.0/actors/Counter/${id}/timers/tick`, { method: 'DELETE' })).status).toBe(204);
    // 'no more fires', shown with markers: one-shot timers of other names on the same actor. An
    // activation's timers fire in due order, each through the actor's turn, so a tick already in
    // the app when DELETE came is logged before mark-0 fires; mark-1 is due after three more ticks
    // would have come, had the timer gone on.
    const ticks = async () => (await b.log()).timers.filter((x) => x.id === id && x.name === 'tick').length;
    const marked = async (name: string, dueTime: string) => {
      expect((await fetch(`${a.base}/v1.0/actors/Counter/${id}/timers/${name}`, { method: 'POST', body: JSON.stringify({ dueTime }) })).status).toBe(204);
      await expect.poll(async () => (await b.log()).timers.some((x) => x.id === id && x.name === name), { timeout: 10_000, interval: 50, message: `marker ${name} never fired` }).toBe(true);
    };
    await marked('mark-0', '0s');
    const fired = await ticks();
    await marked('mark-1', '350ms');
    expect(await ticks(), 'the deleted timer fired again').toBe(fired);
  });

  it('an app invoking its peer with the actor-call header reaches the app, not the actor runtime', async () => {
    // rt-invoke-* headers are the hop's own: the caller's is dropped, so this is a plain call of the app's method
    const r = await fetch(`${a.base}/v1.0/invoke/${appId}/method/Counter/x/state/n`, { method: 'GET', headers: { 'rt-invoke-actor': '1' } });
    expect(r.status).toBe(404); // the actor test app has no such route
  });

  it('a host killed with SIGKILL: its actors move to the other within the heartbeat timeout and calls go on', async () => {
    const ids: string[] = [];
    for (let i = 0; ids.length < 4 && i < 64; i++) {
      const id = `moved-${i}`;
      expect((await call(a, 'Counter', id, 'count')).status).toBe(200);
      if ((await servedBy('Counter', id))[0] === 'b') ids.push(id);
    }
    expect(ids.length).toBe(4);
    b.proc.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise<void>((r) => (b.proc.exitCode !== null || b.proc.signalCode !== null ? r() : b.proc.once('exit', () => r())));
    // calls through a wait for the table without b, then reach a's app
    const answers = await Promise.all(ids.map((id) => call(a, 'Counter', id, 'count')));
    const took = Date.now() - killedAt;
    for (const r of answers) expect(r.status, await r.clone().text()).toBe(200);
    expect(await Promise.all(answers.map((r) => r.json()))).toEqual([2, 2, 2, 2]);
    // the heartbeat timeout, a round of the table, and the machine's noise
    expect(took).toBeLessThan(HEARTBEAT_TIMEOUT_MS + 5000);
    const la = await a.log();
    for (const id of ids) expect(la.calls.filter((c) => c.id === id && c.method === 'count')).toHaveLength(1);
  });
});
