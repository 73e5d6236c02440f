import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../services/net.ts';
import type { InternalJobTrigger } from '../../sidecar/src/jobs/internal.ts';
import type { SchedulerClient } from '../../scheduler/src/client.ts';
import { postJob, sidecarFor, startRecordingApp, tempDir, waitFor, waitJobDone, type RecordingApp } from './helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

describe('job trigger delivery (embedded scheduler)', () => {
  let app: RecordingApp;
  let sc: Sidecar & { base: string };
  const dir = tempDir();
  const count = (name: string) => app.received.filter((r) => r.name === name).length;

  beforeAll(async () => {
    app = await startRecordingApp();
    app.status = (name, n) => {
      if (name.startsWith('fail500')) return 500;
      if (name.startsWith('gone404')) return 404;
      if (name === 'flaky') return n < 3 ? 503 : 200;
      return 200;
    };
    sc = await sidecarFor({ appPort: app.port, dataDir: dir.path });
  });
  afterAll(async () => {
    await sc?.close();
    await app?.close();
    dir.remove();
  });

  it('fires @every with repeats exactly that many times, never before each due time', async () => {
    const t0 = Date.now();
    expect((await postJob(sc.base, 'every', { schedule: '@every 100ms', repeats: 4, data: 'tick' })).status).toBe(204);
    await waitFor(() => count('every') >= 4, 5000, '4 fires');
    await waitJobDone(sc.base, 'every'); // no fire can follow
    expect(count('every')).toBe(4);
    const times = app.received.filter((r) => r.name === 'every').map((r) => r.at);
    // fire k is due at creation + k × 100 ms (later fires follow due times, not the previous fire)
    times.forEach((at, i) => expect(at).toBeGreaterThanOrEqual(t0 + (i + 1) * 100 - 2));
  });

  it('fires a six-field cron on the second', async () => {
    expect((await postJob(sc.base, 'cron', { schedule: '* * * * * *', repeats: 2 })).status).toBe(204);
    await waitFor(() => count('cron') >= 2, 4000, '2 cron fires');
    const [a, b] = app.received.filter((r) => r.name === 'cron').map((r) => r.at);
    expect(b - a).toBeGreaterThan(500); // two different seconds
  });

  it('retries an app 500 per the failure policy, then gives up', async () => {
    const policy = { constant: { interval: '50ms', maxRetries: 2 } };
    expect((await postJob(sc.base, 'fail500', { dueTime: '0s', failurePolicy: policy })).status).toBe(204);
    await waitFor(() => count('fail500') >= 3, 3000, '3 attempts');
    await waitJobDone(sc.base, 'fail500'); // given up on: no attempt can follow
    expect(count('fail500')).toBe(3); // 1 + 2 retries
  });

  it('uses the default policy (constant 1 s, 3 retries) when none is given', async () => {
    expect((await postJob(sc.base, 'fail500-default', { dueTime: '0s' })).status).toBe(204);
    await waitFor(() => count('fail500-default') >= 2, 3000, 'first retry');
    const [a, b] = app.received.filter((r) => r.name === 'fail500-default').map((r) => r.at);
    expect(b - a).toBeGreaterThanOrEqual(900);
  });

  it('does not retry a 404, and drop does not retry a 500', async () => {
    expect((await postJob(sc.base, 'gone404', { dueTime: '0s' })).status).toBe(204);
    expect((await postJob(sc.base, 'fail500-drop', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    await waitFor(() => count('gone404') >= 1 && count('fail500-drop') >= 1, 3000, 'single attempts');
    await waitJobDone(sc.base, 'gone404');
    await waitJobDone(sc.base, 'fail500-drop');
    expect(count('gone404')).toBe(1);
    expect(count('fail500-drop')).toBe(1);
  });

  it('succeeds after transient failures and stops retrying', async () => {
    expect((await postJob(sc.base, 'flaky', { dueTime: '0s', failurePolicy: { constant: { interval: '30ms' } } })).status).toBe(204);
    await waitFor(() => count('flaky') >= 3, 3000, 'third attempt');
    await waitJobDone(sc.base, 'flaky');
    expect(count('flaky')).toBe(3);
  });

  it('keeps internal jobs out of the app: not listed, not delivered to it, handled by their owner', async () => {
    const jobs = sc.ctx.services.internalJobs;
    expect(jobs).toBeDefined();
    const got: InternalJobTrigger[] = [];
    let fails = 1;
    jobs!.onTrigger('workflows', async (t) => {
      if (fails-- > 0) throw new Error('not yet');
      got.push(t);
    });
    const due = Date.now() + 150;
    await jobs!.scheduleOnce('workflows', 'timer-1', due, { instance: 'abc' });
    await jobs!.scheduleOnce('workflows', 'timer-2', Date.now() + 60_000, 1);
    await jobs!.delete('workflows', 'timer-2');
    const list = (await (await fetch(`${sc.base}/v1.0-alpha1/jobs`)).json()) as { jobs: { name: string }[] };
    expect(list.jobs.map((j) => j.name)).not.toContain('timer-1');
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/timer-1`)).status).toBe(500);
    // a rejected handler is retried a second later
    await waitFor(() => got.length >= 1, 5000, 'internal trigger');
    expect(got[0]).toEqual({ owner: 'workflows', name: 'timer-1', data: { instance: 'abc' }, dueAt: due });
    expect(count('timer-1')).toBe(0);
    // acked: the one-shot is gone from the store, so no second delivery can come
    const client = (jobs as unknown as { client: SchedulerClient }).client;
    const key = { namespace: sc.ctx.options.namespace, appId: sc.ctx.options.appId, owner: 'workflows', name: 'timer-1' };
    await waitFor(() => client.get(key).then(() => false, (e: Error) => /not found/.test(e.message)), 3000, 'timer-1 done');
    expect(got).toHaveLength(1);
    // app and internal names never collide
    expect((await postJob(sc.base, 'timer-1', { dueTime: '1h' })).status).toBe(204);
  });
});

describe('delivery when the app is late or down', () => {
  it('holds triggers until the app is up, then retries a down app per policy', async () => {
    const dir = tempDir();
    const port = await freePort();
    const received: string[] = [];
    const sc = await sidecarFor({ appPort: port, dataDir: dir.path, appId: 'late-app' });
    const server = createServer((req, res) => {
      received.push(req.url ?? '');
      res.end();
    });
    const post = vi.spyOn(sc.ctx.app, 'post');
    try {
      // scheduled before the app listens: delivered once it is reachable
      expect((await postJob(sc.base, 'early', { dueTime: '0s', data: 1 })).status).toBe(204);
      // an internal job due after it comes on the same stream: once its owner has it, the sidecar
      // was handed 'early' too, and holds it (a delivery would have called the app channel at once)
      const internal = sc.ctx.services.internalJobs!;
      const later = new Promise<void>((r) => internal.onTrigger('probe', async () => r()));
      await internal.scheduleOnce('probe', 'after-early', Date.now() + 20, null);
      await later;
      expect(post).not.toHaveBeenCalled();
      expect(received).toHaveLength(0);
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
      await waitFor(() => received.includes('/job/early'), 5000, 'delivery after the app started');
      // app goes down: the trigger fails and is retried until it is back
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      expect((await postJob(sc.base, 'while-down', { dueTime: '0s', failurePolicy: { constant: { interval: '100ms', maxRetries: 50 } } })).status).toBe(204);
      // two attempts failed while it was down
      const failed = () => post.mock.settledResults.filter((r, i) => post.mock.calls[i][0] === '/job/while-down' && r.type === 'rejected').length;
      await waitFor(() => failed() >= 2, 5000, 'two failed attempts');
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
      await waitFor(() => received.includes('/job/while-down'), 5000, 'delivery after the app came back');
      expect(received.filter((u) => u === '/job/while-down')).toHaveLength(1);
    } finally {
      await sc.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      dir.remove();
    }
  });
});

describe('persistence of the embedded scheduler', () => {
  it('keeps jobs across a sidecar restart and catches up missed fires in order', async () => {
    const dir = tempDir();
    const app = await startRecordingApp();
    // the second fire fails once, and its retry is an hour away: the sidecar is stopped then
    app.status = (name, n) => (name === 'tick' && n === 2 ? 500 : 200);
    const ticks = () => app.received.filter((r) => r.name === 'tick');
    try {
      let sc = await sidecarFor({ appPort: app.port, dataDir: dir.path, appId: 'restart' });
      // every fire of 'tick' is already past when it is made: missed, as if the sidecar had been down
      const start = new Date(Date.now() - 10_000).toISOString();
      const policy = { constant: { interval: '1h', maxRetries: 1 } };
      expect((await postJob(sc.base, 'tick', { schedule: '@every 200ms', repeats: 8, dueTime: start, failurePolicy: policy })).status).toBe(204);
      expect((await postJob(sc.base, 'later', { dueTime: '1s', data: { keep: true } })).status).toBe(204);
      await waitFor(() => ticks().length >= 2, 3000, 'first fires');
      await sc.close();
      const before = ticks().map((r) => r.dueTime);
      expect(before).toHaveLength(2);
      sc = await sidecarFor({ appPort: app.port, dataDir: dir.path, appId: 'restart' });
      try {
        await waitFor(() => ticks().length >= 9, 5000, 'all 8 fires (and the failed attempt)');
        await waitFor(() => app.received.some((r) => r.name === 'later'), 3000, 'the one-shot');
        await waitJobDone(sc.base, 'tick'); // no fire can follow
        // after the restart: the failed fire again, then every missed one, in order, each once
        const after = ticks().slice(2).map((r) => Date.parse(r.dueTime!));
        expect(after).toHaveLength(7);
        expect(after[0]).toBe(Date.parse(before[1]!));
        after.forEach((at, i) => expect(at).toBe(Date.parse(start) + (i + 1) * 200));
        expect(JSON.parse(app.received.find((r) => r.name === 'later')!.body)).toEqual({ keep: true });
      } finally {
        await sc.close();
      }
    } finally {
      await app.close();
      dir.remove();
    }
  });

  it('answers 500 with a clear message in kubernetes mode without a scheduler', async () => {
    const dir = tempDir();
    // a free internal port: kubernetes mode's default (50002) may be taken by another suite
    const sc = await sidecarFor({ dataDir: dir.path, mode: 'kubernetes', internalGrpcPort: 0 });
    try {
      const res = await postJob(sc.base, 'x', { dueTime: '1s' });
      expect(res.status).toBe(500);
      expect(((await res.json()) as { message: string }).message).toMatch(/needs a scheduler/);
      expect(sc.ctx.services.internalJobs).toBeUndefined();
    } finally {
      await sc.close();
      dir.remove();
    }
  });
});
