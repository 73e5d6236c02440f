/**
 * A host that stops (SIGTERM) with two hosts and one placement service, each host its own process
 * (remote-host.ts): it leaves placement first, so calls to its actors made meanwhile are answered
 * by the other host; the calls it is running finish with their answers (drainOngoingCallTimeout);
 * each of its actors is deactivated (DELETE to its app) before the other host's app sees a call of
 * it, so no actor is active on both at once. The stopped host's app log is written to a file at
 * its end (its log server stops with it).
 */
import { mkdtemp, mkdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlacement, type RunningPlacement } from '../placement/harness.ts';
import type { ActorAppLog } from './app.ts';
import { startHost, untilShared, type Host } from './hosts.ts';

const SLOW_MS = 2000;
const DEACTIVATE_MS = 300;
// the app takes its time over a deactivation: the other host must not get a call of the actor meanwhile
const CONFIG = { entities: ['Counter'], actorIdleTimeout: '1h', actorScanInterval: '1s', drainOngoingCallTimeout: '5s', deactivateDelayMs: DEACTIVATE_MS };

let dir: string;
let placement: RunningPlacement;
const hosts: Host[] = [];
let a: Host;
let b: Host;
const appId = `shutdown-${randomUUID().slice(0, 8)}`;

const call = (h: Host, id: string, method: string, body: unknown) => fetch(`${h.base}/v1.0/actors/Counter/${id}/method/${method}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

/** `n` actor ids that placement gives to `owner`, each activated there by an echo. */
async function idsOn(owner: Host, prefix: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; out.length < n && i < 200; i++) {
    const id = `${prefix}-${i}`;
    expect((await call(owner, id, 'echo', 'x')).status).toBe(200);
    if ((await owner.log()).calls.some((c) => c.id === id)) out.push(id);
  }
  if (out.length < n) throw new Error(`only ${out.length} of ${n} actors landed on ${owner.name}`);
  return out;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-shutdown-'));
  await mkdir(join(dir, 'resources'));
  placement = await startPlacement({ heartbeatTimeoutMs: 2000 });
  const settings = (n: string) => ({ appId, placement: [placement.address], resourcesPath: join(dir, 'resources'), dataDir: join(dir, `data-${n}`), config: CONFIG, logFile: join(dir, `log-${n}.json`) });
  [a, b] = await Promise.all([startHost('a', settings('a')), startHost('b', settings('b'))]);
  hosts.push(a, b);
  // both are in the table once calls through one reach both apps
  await untilShared(b, [a, b]);
}, 120_000);

afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  await placement?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe('a host that stops', () => {
  it('leaves placement first, finishes its calls in flight, and hands its actors over without two activations', async () => {
    const [slowViaB, slowViaA] = await idsOn(a, 'slow', 2);
    const others = await idsOn(a, 'other', 6);
    // one slow call forwarded from b, one through a's own API
    const slow = [call(b, slowViaB!, 'sleep', { ms: SLOW_MS }), call(a, slowViaA!, 'sleep', { ms: SLOW_MS })].map((p) => p.then(async (r) => ({ status: r.status, body: await r.json(), at: Date.now() })));
    await expect.poll(async () => (await a.log()).calls.filter((c) => c.method === 'sleep').length, { timeout: 10_000, interval: 20 }).toBe(2);
    const exited = new Promise<number | null>((r) => a.proc.once('exit', (code) => r(code)));
    const stoppedAt = Date.now();
    a.proc.kill('SIGTERM');

    // during the drain: a's other actors are answered through b by b's app
    const answered = await Promise.all(
      others.map(async (id) => {
        const r = await call(b, id, 'echo', id);
        return { id, status: r.status, body: await r.json(), at: Date.now() };
      }),
    );
    for (const r of answered) expect(r, r.id).toMatchObject({ status: 200, body: r.id });
    const slowAnswers = await Promise.all(slow);
    for (const r of slowAnswers) expect(r).toMatchObject({ status: 200, body: { slept: SLOW_MS } });
    // they did not wait for the slow calls: a had left placement
    const lastOther = Math.max(...answered.map((r) => r.at));
    expect(lastOther).toBeLessThan(Math.min(...slowAnswers.map((r) => r.at)));

    const code = await Promise.race([exited, new Promise((_, reject) => setTimeout(() => reject(new Error('host a did not exit within 15 s of SIGTERM')), 15_000).unref())]);
    expect(code).toBe(0);
    const took = Date.now() - stoppedAt;
    console.log(`[shutdown] host a exited ${took} ms after SIGTERM (slow calls: ${SLOW_MS} ms)`);
    const la = JSON.parse(await readFile(join(dir, 'log-a.json'), 'utf8')) as ActorAppLog;
    const lb = await b.log();

    // every actor of a ended at a (DELETE to its app) after its last call there finished
    for (const id of [slowViaB!, slowViaA!, ...others]) {
      const ended = la.deactivated.filter((d) => d.id === id);
      expect(ended, `${id} deactivated at a`).toHaveLength(1);
      for (const c of la.calls.filter((c) => c.id === id)) expect(c.done ?? Number.POSITIVE_INFINITY, `${id}: a call still running at its deactivation`).toBeLessThanOrEqual(ended[0]!.at);
      // and a's app had answered the DELETE before b's app saw any call of it: never active on both
      const atB = lb.calls.filter((c) => c.id === id);
      if (atB.length > 0) expect(Math.min(...atB.map((c) => c.at)), `${id} called at b before a ended it`).toBeGreaterThanOrEqual(ended[0]!.done!);
    }
    for (const id of others) expect(lb.calls.some((c) => c.id === id && c.method === 'echo'), id).toBe(true);
    // the slow actors were not called again: b never had them
    expect(lb.calls.some((c) => c.id === slowViaB || c.id === slowViaA)).toBe(false);
    // the drain waited for the slow calls, not for drainOngoingCallTimeout
    expect(took).toBeLessThan(SLOW_MS + 8000);
  });
});
