/**
 * Issue 42's test: two replicas of one app (each its own process: the actor test app and its
 * sidecar, test/actors/remote-host.ts) sharing an actor type through one placement service, one
 * `rt scheduler` process for both, actor state on a real PostgreSQL.
 *  - 1,000 actors, each called through both replicas: every counter in actor state equals its
 *    calls, and every actor's calls reached one app (no actor active twice, from the apps' logs);
 *  - reminders fire at their actor's host only, once per period;
 *  - `kill -9` of one replica: its actors move to the other within the heartbeat timeout, the
 *    counters go on, and in a window after the move every reminder fires once per period at the
 *    survivor: none lost, none twice.
 * The reminder windows are conditions, not sleeps: a window ends once every reminder fired WINDOW
 * times after its start; a reminder that does not within the deadline is lost, two fires of one
 * closer than half a period are a double fire.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentYaml } from '../../test/grpc/harness.ts';
import { startPlacement, type RunningPlacement } from '../../test/placement/harness.ts';
import { requireService } from '../../test/services/ci.ts';
import { freePort, waitForPort } from '../../test/services/net.ts';
import { dropStateTables, postgresTarget } from '../../test/services/postgres.ts';
import { startHost, untilShared, type Host } from '../../test/actors/hosts.ts';
import { runRt, type RtProcess } from '../rt-process.ts';

const pg = await postgresTarget();
const havePg = requireService('PostgreSQL', pg.available, `nothing answers at ${pg.url}`);

const ACTORS = 1000;
const CONCURRENCY = 24;
const HEARTBEAT_TIMEOUT_MS = 2000;
const REMINDERS = 12;
const PERIOD_MS = 1000;
/** Fires of every reminder a window waits for, before and after the kill. */
const WINDOW = 3;
/** How long a window may take before its missing reminders count as lost (WINDOW periods and the loaded machine's noise). */
const FIRE_DEADLINE_MS = WINDOW * PERIOD_MS + 10_000;

let dir: string;
let placement: RunningPlacement;
let scheduler: RtProcess | undefined;
const hosts: Host[] = [];
let a: Host;
let b: Host;
const appId = `replicas-${randomUUID().slice(0, 8)}`;
const table = `actors_${randomUUID().slice(0, 8)}`;

const count = (h: Host, id: string) => fetch(`${h.base}/v1.0/actors/Counter/${id}/method/count`, { method: 'POST' });

/** Runs `work` over `items`, `CONCURRENCY` at a time. */
async function pool<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

beforeAll(async () => {
  if (!havePg) return;
  dir = await mkdtemp(join(tmpdir(), 'rt-actors-replicas-'));
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'store.yaml'), componentYaml('actorstore', 'state.postgresql', { connectionString: pg.url, tableName: table, actorStateStore: 'true' }));
  const schedPort = await freePort();
  scheduler = runRt(['scheduler', '--port', String(schedPort), '--data-dir', join(dir, 'sched'), '--log-level', 'warn'], { RT_HOME: join(dir, 'home') });
  await waitForPort('127.0.0.1', schedPort, 30_000);
  placement = await startPlacement({ heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
  const settings = (n: string) => ({
    appId,
    placement: [placement.address],
    resourcesPath: join(dir, 'resources'),
    dataDir: join(dir, `data-${n}`),
    config: { entities: ['Counter'], actorIdleTimeout: '1h', drainOngoingCallTimeout: '2s' },
    sidecar: { schedulerAddresses: [`127.0.0.1:${schedPort}`] },
  });
  [a, b] = await Promise.all([startHost('a', settings('a')), startHost('b', settings('b'))]);
  hosts.push(a, b);
  // both are in the table once calls through one reach both apps
  await untilShared(a, [a, b]);
}, 120_000);

afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
  await scheduler?.stop();
  await placement?.close();
  if (havePg) await dropStateTables(pg.url, [table]);
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

type RemindersLog = { reminders: { id: string; at: number }[] };

/** Fires of one reminder actor at or after `from`, in one app's log. */
function firesSince(log: RemindersLog, id: string, from: number): number[] {
  return log.reminders.filter((r) => r.id === id && r.at >= from).map((r) => r.at);
}

/**
 * Waits until every reminder has fired `n` times at or after `from` (counted over `hosts`' apps),
 * polling the logs; the deadline running out means reminders were lost, and the error names them.
 * Returns the last logs read.
 */
async function untilFired(hosts: Host[], ids: string[], from: number, n: number, timeoutMs: number): Promise<RemindersLog[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const logs = await Promise.all(hosts.map((h) => h.log()));
    const short = ids.filter((id) => logs.reduce((k, l) => k + firesSince(l, id, from).length, 0) < n);
    if (short.length === 0) return logs;
    if (Date.now() > end) throw new Error(`reminders lost: ${short.join(', ')} fired fewer than ${n} times in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** No two fires of one reminder closer than half a period (a double fire), over all `logs`. */
function expectNoDoubleFires(logs: RemindersLog[], ids: string[], from: number): void {
  for (const id of ids) {
    const at = logs.flatMap((l) => firesSince(l, id, from)).sort((x, y) => x - y);
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!, `${id} fired twice`).toBeGreaterThan(PERIOD_MS / 2);
  }
}

describe.runIf(havePg)('two replicas of one app share an actor type', () => {
  it('1,000 actors called through both replicas, reminders, then kill -9 of one replica', async () => {
    const ids = Array.from({ length: ACTORS }, (_, i) => `c-${i}`);
    // each actor: once through a, once through b
    const failures: string[] = [];
    await pool(ids, async (id) => {
      for (const h of [a, b]) {
        const r = await count(h, id);
        if (r.status !== 200) failures.push(`${id} via ${h.name}: ${r.status} ${await r.text()}`);
      }
    });
    expect(failures.slice(0, 5)).toEqual([]);
    const [la, lb] = await Promise.all([a.log(), b.log()]);
    const callsOf = (log: typeof la) => {
      const m = new Map<string, number>();
      for (const c of log.calls) if (c.method === 'count') m.set(c.id, (m.get(c.id) ?? 0) + 1);
      return m;
    };
    const [ca, cb] = [callsOf(la), callsOf(lb)];
    const onB = ids.filter((id) => cb.has(id));
    for (const id of ids) expect([ca.get(id) ?? 0, cb.get(id) ?? 0].sort(), id).toEqual([0, 2]);
    expect(onB.length).toBeGreaterThan(ACTORS / 4);
    expect(onB.length).toBeLessThan((3 * ACTORS) / 4);
    // every counter equals its calls, read through the replica that is not the host for half of them
    await pool(ids, async (id) => {
      const v = await (await fetch(`${a.base}/v1.0/actors/Counter/${id}/state/n`)).text();
      if (v !== '2') failures.push(`${id}: ${v}`);
    });
    expect(failures.slice(0, 5)).toEqual([]);

    // reminders, registered through a, fire at their actor's host only
    const rem = Array.from({ length: REMINDERS }, (_, i) => `r-${i}`);
    for (const id of rem) expect((await fetch(`${a.base}/v1.0/actors/Counter/${id}/reminders/tick`, { method: 'PUT', body: JSON.stringify({ dueTime: '0s', period: `${PERIOD_MS}ms` }) })).status).toBe(204);
    // warm-up: every reminder has fired once; then a window of WINDOW fires of each
    await untilFired([a, b], rem, 0, 1, FIRE_DEADLINE_MS);
    const w0 = Date.now();
    const [ra, rb] = await untilFired([a, b], rem, w0, WINDOW, FIRE_DEADLINE_MS);
    const remOnB = rem.filter((id) => firesSince(rb!, id, 0).length > 0);
    for (const id of rem) expect(Math.min(firesSince(ra!, id, w0).length, firesSince(rb!, id, w0).length), `${id} fired at both replicas`).toBe(0);
    expectNoDoubleFires([ra!, rb!], rem, w0);

    // kill -9 of b: its actors answer through a within the heartbeat timeout
    b.proc.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise<void>((r) => (b.proc.exitCode !== null || b.proc.signalCode !== null ? r() : b.proc.once('exit', () => r())));
    const first = await count(a, onB[0]!);
    const moved = Date.now() - killedAt;
    expect(first.status, await first.clone().text()).toBe(200);
    expect(await first.json()).toBe(3);
    expect(moved).toBeLessThan(HEARTBEAT_TIMEOUT_MS + 3000);
    await pool(onB.slice(1), async (id) => {
      const r = await count(a, id);
      const v = r.status === 200 ? await r.text() : `${r.status} ${await r.text()}`;
      if (v !== '3') failures.push(`${id}: ${v}`);
    });
    expect(failures.slice(0, 5)).toEqual([]);

    // a window after the move: every reminder, b's included, fires at a once per period
    const movedAt = Date.now();
    await untilFired([a], rem, movedAt, 1, FIRE_DEADLINE_MS);
    const w1 = Date.now();
    const [after] = await untilFired([a], rem, w1, WINDOW, FIRE_DEADLINE_MS);
    expectNoDoubleFires([after!], rem, w1);
    expect(remOnB.length).toBeGreaterThan(0);
  }, 120_000);
});
