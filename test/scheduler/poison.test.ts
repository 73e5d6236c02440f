/**
 * Inputs and faults that once took the scheduler down (issue 17): a period too long to hold,
 * a stored job that cannot be loaded, a store that cannot be opened, a create retried after
 * its answer was lost, and a sidecar slow to find a scheduler that came back (its stream's backoff
 * on fake time, the channel's reconnects waited for as they come).
 */
import { spawn } from 'node:child_process';
import { writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { embeddedStorePath } from '../../scheduler/src/embedded.ts';
import { SchedulerEngine } from '../../scheduler/src/engine.ts';
import { GrpcSchedulerClient } from '../../scheduler/src/grpc/client.ts';
import { schedulerService } from '../../scheduler/src/grpc/proto.ts';
import { startScheduler, type RunningScheduler } from '../../scheduler/src/main.ts';
import { SqliteJobStore } from '../../scheduler/src/store/sqlite.ts';
import { ManualClock } from '../../shared/clock.ts';
import { freePort } from '../services/net.ts';
import { postJob, sidecarFor, tempDir, waitFor } from '../jobs/helpers.ts';
import { spawnScheduler } from './harness.ts';

const silent = pino({ level: 'silent' });
const RT = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));

describe('scheduler against poison inputs', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const dir = () => {
    const d = tempDir('rt-sched-poison-');
    cleanups.push(() => d.remove());
    return d.path;
  };

  it('refuses periods whose fires fall past the time bound with 400, and the jobs API keeps answering', async () => {
    const sc = await sidecarFor({ dataDir: dir(), appId: 'poison' });
    cleanups.push(() => sc.close());
    for (const schedule of ['@every 100000000000h', '@every 3000000000h', '@every 90000000h']) {
      const res = await postJob(sc.base, 'far', { schedule });
      expect(res.status, schedule).toBe(400);
      const err = (await res.json()) as { errorCode: string; message: string };
      expect(err.errorCode).toBe('RT_SCHEDULER_SCHEDULE_INVALID');
      expect(err.message).toMatch(/9999-12-31T23:59:59Z/);
    }
    // the same bound as dueTime and ttl
    expect((await postJob(sc.base, 'far', { dueTime: '100000000000h' })).status).toBe(400);
    expect((await postJob(sc.base, 'far', { schedule: '@every 1h', ttl: '10000-01-01T00:00:00Z' })).status).toBe(400);
    expect((await postJob(sc.base, 'near', { schedule: '@every 60000000h' })).status).toBe(204); // ~6,850 years: fits
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/near`)).status).toBe(200);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs`)).status).toBe(200);
  });

  it('quarantines a stored job that cannot be loaded; the sidecar starts and the other jobs answer', async () => {
    const data = dir();
    const file = embeddedStorePath(data, 'default', 'poison');
    // a store with one good job, then a row as an older rt wrote it for "@every 3000000000h"
    const first = await sidecarFor({ dataDir: data, appId: 'poison' });
    expect((await postJob(first.base, 'good', { schedule: '@every 1h', data: 1 })).status).toBe(204);
    await first.close();
    const db = new DatabaseSync(file);
    db.prepare(
      `INSERT INTO jobs (namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at) VALUES ('default', 'poison', '', 'far', '{"schedule":"@every 3000000000h"}', ?, 'g', 0, ?, NULL)`,
    ).run(Date.now(), 10_800_000_000_000_000n);
    db.prepare(`INSERT INTO jobs (namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at) VALUES ('default', 'poison', '', 'torn', '{not json', 1, 'g', 0, 1, NULL)`).run();
    // job data kept as an Any (gRPC), but its bytes are not base64
    const anyRow = `INSERT INTO jobs (namespace, app_id, owner, name, spec, created_at, gen, count, next_at, expires_at) VALUES ('default', 'poison', '', ?, ?, ?, 'g', 0, ?, NULL)`;
    db.prepare(anyRow).run('bad-any', JSON.stringify({ dueTime: '1h', dataAny: { typeUrl: '', value: 'not base64!' } }), Date.now(), Date.now() + 3_600_000);
    db.close();

    const sc = await sidecarFor({ dataDir: data, appId: 'poison' });
    cleanups.push(() => sc.close());
    const list = await fetch(`${sc.base}/v1.0-alpha1/jobs`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { jobs: { name: string }[] }).jobs.map((j) => j.name)).toEqual(['good']);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/good`)).status).toBe(200);
    // kept aside with the reason, for a human to look at
    const check = new DatabaseSync(file, { readOnly: true });
    const rows = check.prepare('SELECT name, reason FROM jobs_quarantine ORDER BY name').all() as { name: string; reason: string }[];
    check.close();
    expect(rows.map((r) => r.name)).toEqual(['bad-any', 'far', 'torn']);
    expect(rows[0].reason).toMatch(/not base64/);
    expect(rows[1].reason).toMatch(/too large|out of bounds/);
  });

  it('rt scheduler whose store cannot be opened exits non-zero instead of running half-up', { timeout: 30_000 }, async () => {
    const data = dir();
    mkdirSync(data, { recursive: true });
    writeFileSync(join(data, 'scheduler.sqlite'), Buffer.alloc(8192, 0x5a)); // not a database
    const port = await freePort();
    const proc = spawn(process.execPath, [RT, 'scheduler', '--port', String(port), '--data-dir', data, '--log-level', 'error'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    cleanups.push(() => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    });
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/could not start/);
  });

  it('a retried create whose first attempt was stored is success, not 409; another request is still a conflict', async () => {
    const data = dir();
    const port = await freePort();
    const sched: RunningScheduler = await startScheduler(
      { port, listenAddress: '127.0.0.1', dataDir: data, etcdEndpoints: [], etcdPrefix: '/rt', partitions: 16, leaseTtlSec: 5, replicaId: 'r', logLevel: 'silent' },
      silent,
    );
    cleanups.push(() => sched.close());
    const Ctor = schedulerService();
    const raw = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & Record<string, (req: unknown, cb: (e: grpc.ServiceError | null) => void) => void>;
    cleanups.push(() => raw.close());
    const create = (requestId: string) =>
      new Promise<grpc.ServiceError | null>((resolve) =>
        raw.ScheduleJob.call(raw, { key: { namespace: 'default', appId: 'a', owner: '', name: 'j' }, job: { dueTime: '1h' }, overwrite: false, requestId }, (e) => resolve(e)),
      );
    expect(await create('req-1')).toBeNull();
    // the same request again, as the sidecar's client sends it after a lost answer
    expect(await create('req-1')).toBeNull();
    const other = await create('req-2');
    expect(other?.code).toBe(grpc.status.ALREADY_EXISTS);
  });

  it('engine: the same request id is idempotent, with and without a restart of the store', async () => {
    const file = join(dir(), 's.sqlite');
    const key = { namespace: 'ns', appId: 'a', owner: '', name: 'j' };
    let e = new SchedulerEngine({ log: silent, store: new SqliteJobStore(file) });
    await e.start();
    await e.schedule(key, { dueTime: '1h' }, false, 'r1');
    await e.close();
    e = new SchedulerEngine({ log: silent, store: new SqliteJobStore(file) });
    await e.start();
    cleanups.push(() => e.close());
    await expect(e.schedule(key, { dueTime: '1h' }, false, 'r1')).resolves.toBeUndefined();
    await expect(e.schedule(key, { dueTime: '1h' }, false)).rejects.toMatchObject({ kind: 'exists' });
    await expect(e.schedule(key, { dueTime: '1h' }, false, 'r2')).rejects.toMatchObject({ kind: 'exists' });
  });

  it("the client's stream waits out its backoff on the client's clock", async () => {
    const port = await freePort();
    const clock = new ManualClock();
    const client = new GrpcSchedulerClient([`127.0.0.1:${port}`], { log: silent, clock });
    cleanups.push(() => client.close());
    client.watch({ namespace: 'default', appId: 'a' }, async () => true);
    // nothing listens: the first attempt fails at once, and the next waits 100 ms on the clock
    await waitFor(() => clock.pending === 1, 10_000, 'the retry timer');
    expect(clock.next).toBe(clock.now() + 100);
    const sched = await startScheduler(
      { port, listenAddress: '127.0.0.1', dataDir: dir(), etcdEndpoints: [], etcdPrefix: '/rt', partitions: 16, leaseTtlSec: 5, replicaId: 'r', logLevel: 'silent' },
      silent,
    );
    cleanups.push(() => sched.close());
    await clock.advance(99);
    expect(clock.pending).toBe(1);
    expect(client.connectedAddresses()).toEqual([]);
    await clock.advance(1);
    await waitFor(() => client.connectedAddresses().length === 1, 10_000, 'the stream after its backoff');
  });

  it('a sidecar finds a scheduler that came back within a second', { timeout: 40_000 }, async () => {
    const data = dir();
    const port = await freePort();
    let sched = await spawnScheduler(port, ['--data-dir', data]);
    cleanups.push(() => sched.kill('SIGKILL'));
    const client = new GrpcSchedulerClient([sched.address], { log: silent });
    cleanups.push(() => client.close());
    client.watch({ namespace: 'default', appId: 'a' }, async () => true);
    await waitFor(() => client.connectedAddresses().length === 1, 10_000, 'the first connection');
    await sched.kill('SIGKILL');
    await waitFor(() => client.connectedAddresses().length === 0, 10_000, 'the loss');
    // the channel's reconnects (grpc-js's timers: 200 ms, growing 1.6x to its cap of 300 ms) meet a
    // port that takes each connection and closes it; once three have come, two have failed before
    // them and the backoff is at its cap
    let reconnects = 0;
    const refuser = createServer((s) => (reconnects++, s.destroy()));
    await new Promise<void>((r) => refuser.listen(port, '127.0.0.1', r));
    await waitFor(() => reconnects >= 3, 10_000, 'three reconnects of the channel');
    await new Promise((r) => refuser.close(r));
    sched = await spawnScheduler(port, ['--data-dir', data]);
    const back = Date.now();
    await waitFor(() => client.connectedAddresses().length === 1, 10_000, 'the reconnect');
    expect(Date.now() - back).toBeLessThan(1000);
  });
});
