/**
 * Jobs end to end through the real `rt run`: the CLI starts its in-process scheduler (gRPC on
 * loopback), the sidecar and the example app; a job scheduled on the sidecar reaches the app
 * once, on time, with its data — and still does after `rt run` is restarted.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../test/services/net.ts';
import { runRt, until, type RtProcess } from '../rt-process.ts';

const fired = (out: string, name: string) => out.split('\n').filter((l) => l.includes(`[app] job ${name} fired with data`));

describe('jobs through rt run (real CLI)', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'rt-jobs-e2e-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('delivers a scheduled job to the example app once, on time, with its data; jobs survive a restart', { timeout: 60_000 }, async () => {
    const [appPort, httpPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
    const args = ['run', '--app-id', 'example', '--app-port', String(appPort), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', join(home, 'data'), '--', process.execPath, 'examples/app/server.ts'];
    const base = `http://127.0.0.1:${httpPort}`;
    let run = runRt(args, { HOME: home });
    try {
      await until(run, () => run.out().includes('[app] listening'));
      // the sidecar talks to rt run's scheduler over gRPC on loopback
      const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { scheduler: { connected_addresses: string[] } };
      expect(md.scheduler.connected_addresses).toHaveLength(1);
      expect(md.scheduler.connected_addresses[0]).toMatch(/^127\.0\.0\.1:\d+$/);

      const due = new Date(Date.now() + 1500);
      const res = await fetch(`${base}/v1.0-alpha1/jobs/greet`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ dueTime: due.toISOString(), data: { hello: 'from rt', n: 42 } }),
      });
      expect(res.status).toBe(204);
      expect(await (await fetch(`${base}/v1.0-alpha1/jobs/greet`)).json()).toEqual({ name: 'greet', dueTime: due.toISOString(), data: { hello: 'from rt', n: 42 } });
      await until(run, () => fired(run.out(), 'greet').length > 0, 10_000);
      const firedAt = Date.now();
      expect(firedAt).toBeGreaterThanOrEqual(due.getTime());
      expect(fired(run.out(), 'greet')).toEqual(['[app] job greet fired with data {"hello":"from rt","n":42}']);
      // done (acked, nothing stored to fire): it cannot fire again
      await vi.waitFor(async () => expect((await fetch(`${base}/v1.0-alpha1/jobs/greet`)).status).toBe(500), { timeout: 10_000, interval: 50 });
      expect(fired(run.out(), 'greet')).toHaveLength(1);

      // a job that comes due while rt run is stopped fires after the next start; due once rt run
      // has stopped (a graceful stop takes over 1 s: the app's, then the sidecar's)
      const laterDue = Date.now() + 2500;
      expect((await fetch(`${base}/v1.0-alpha1/jobs/later`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: new Date(laterDue).toISOString(), data: 'kept' }) })).status).toBe(204);
      const stopped = run;
      await run.stop();
      expect(fired(stopped.out(), 'later'), 'rt run stopped after the job came due: the case needs a longer due time').toEqual([]);
      // the scheduler keeps real time: the job has come due while nothing runs once the clock is
      // past its due time, so the wait is until then, no longer (the stop took part of it)
      await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(laterDue), { timeout: 5000, interval: 20 });
      run = runRt(args, { HOME: home });
      await until(run, () => fired(run.out(), 'later').length > 0, 20_000);
      expect(fired(run.out(), 'later')).toEqual(['[app] job later fired with data "kept"']);
    } finally {
      await run.stop();
    }
  });

  it('rt run --scheduler-host-address uses a separate rt scheduler instead of its own', { timeout: 60_000 }, async () => {
    const [appPort, httpPort, grpcPort, schedPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const sched = runRt(['scheduler', '--port', String(schedPort), '--data-dir', join(home, 'sched')], { HOME: home });
    let run: RtProcess | undefined;
    try {
      await until(sched, () => sched.out().includes('rt scheduler ready'));
      run = runRt(
        ['run', '--app-id', 'example', '--app-port', String(appPort), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--scheduler-host-address', `127.0.0.1:${schedPort}`, '--data-dir', join(home, 'data2'), '--', process.execPath, 'examples/app/server.ts'],
        { HOME: home },
      );
      const r = run;
      await until(r, () => r.out().includes('[app] listening'));
      const base = `http://127.0.0.1:${httpPort}`;
      let addrs: string[] = [];
      for (let i = 0; i < 100 && addrs.length === 0; i++) {
        addrs = ((await (await fetch(`${base}/v1.0/metadata`)).json()) as { scheduler: { connected_addresses: string[] } }).scheduler.connected_addresses;
        if (addrs.length === 0) await new Promise((res) => setTimeout(res, 50));
      }
      expect(addrs).toEqual([`127.0.0.1:${schedPort}`]);
      expect((await fetch(`${base}/v1.0/jobs/remote`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '300ms', data: [1, 2, 3] }) })).status).toBe(204);
      await until(r, () => fired(r.out(), 'remote').length > 0, 10_000);
      expect(fired(r.out(), 'remote')).toEqual(['[app] job remote fired with data [1,2,3]']);
    } finally {
      await run?.stop();
      await sched.stop();
    }
  });
});
