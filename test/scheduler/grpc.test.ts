import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { schedulerService } from '../../scheduler/src/grpc/proto.ts';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScheduler, type RunningScheduler, type SchedulerProcessOptions } from '../../scheduler/src/main.ts';
import { ManualClock } from '../../shared/clock.ts';
import { freePort } from '../services/net.ts';
import { postJob, sidecarFor, startRecordingApp, tempDir, waitFor, type RecordingApp } from '../jobs/helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

const silent = pino({ level: 'silent' });

describe('sidecar ↔ rt scheduler over gRPC (SQLite store)', () => {
  const dir = tempDir('rt-sched-grpc-');
  let opts: SchedulerProcessOptions;
  let sched: RunningScheduler;
  let app: RecordingApp;
  let sc: Sidecar & { base: string };
  const metadataAddresses = async () => ((await (await fetch(`${sc.base}/v1.0/metadata`)).json()) as { scheduler: { connected_addresses: string[] } }).scheduler.connected_addresses;

  beforeAll(async () => {
    opts = {
      port: await freePort(),
      listenAddress: '127.0.0.1',
      dataDir: dir.path,
      etcdEndpoints: [],
      etcdPrefix: '/rt/scheduler',
      partitions: 16,
      leaseTtlSec: 5,
      replicaId: 'r1',
      logLevel: 'silent',
    };
    sched = await startScheduler(opts, silent);
    app = await startRecordingApp();
    sc = await sidecarFor({ appPort: app.port, dataDir: dir.path, appId: 'grpc-app', schedulerAddresses: [`127.0.0.1:${opts.port}`] });
  });
  afterAll(async () => {
    await sc?.close();
    await sched?.close();
    await app?.close();
    dir.remove();
  });

  it('reports the scheduler it is connected to in metadata', async () => {
    let addrs: string[] = [];
    for (let i = 0; i < 100 && addrs.length === 0; i++) {
      addrs = await metadataAddresses();
      if (addrs.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(addrs).toEqual([`127.0.0.1:${opts.port}`]);
  });

  it('schedules, reads, lists and deletes through the scheduler, with the same statuses', async () => {
    expect((await postJob(sc.base, 'g1', { schedule: '@every 1h', data: { a: [1, 2] }, repeats: 2, ttl: '3h', failurePolicy: { drop: {} } })).status).toBe(204);
    expect(await (await fetch(`${sc.base}/v1.0-alpha1/jobs/g1`)).json()).toEqual({
      name: 'g1',
      schedule: '@every 1h',
      repeats: 2,
      ttl: '3h',
      data: { a: [1, 2] },
      failurePolicy: { drop: {} },
    });
    expect((await postJob(sc.base, 'g1', { dueTime: '1h' })).status).toBe(409);
    const bad = await postJob(sc.base, 'g2', { schedule: '0 0 25 * * *' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ errorCode: 'RT_SCHEDULER_SCHEDULE_INVALID', message: expect.stringMatching(/field 3 \(hours\).*0-23/) });
    const list = (await (await fetch(`${sc.base}/v1.0-alpha1/jobs`)).json()) as { jobs: { name: string }[] };
    expect(list.jobs.map((j) => j.name)).toEqual(['g1']);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/g1`, { method: 'DELETE' })).status).toBe(204);
    const missing = await fetch(`${sc.base}/v1.0-alpha1/jobs/g1`);
    expect(missing.status).toBe(500);
    expect(await missing.json()).toMatchObject({ errorCode: 'RT_SCHEDULER_GET_JOB', message: expect.stringMatching(/not found/) });
  });

  it('delivers triggers over the stream and the app gets the data', async () => {
    expect((await postJob(sc.base, 'fire', { dueTime: '100ms', data: 'over grpc' })).status).toBe(204);
    const got = await waitFor(() => app.received.find((r) => r.name === 'fire'), 5000, 'trigger');
    expect(JSON.parse(got.body)).toBe('over grpc');
  });

  it('keeps job data scheduled as an Any (empty type_url, any bytes) through the scheduler, for GetJob and the app', async () => {
    const api = new (runtimeClient())(`127.0.0.1:${sc.grpcPort}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (r: unknown, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void>;
    const call = <T>(method: string, req: unknown) => new Promise<T>((res, rej) => api[method].call(api, req, (e, r) => (e ? rej(e) : res(r as T))));
    try {
      const json = { type_url: '', value: Buffer.from('{"task_type":"data_processing","items":42}') };
      const text = { type_url: 'type.googleapis.com/shop.Order', value: Buffer.from([0x0a, 0x03, 0x61, 0x62, 0x63, 0xff]) };
      await call('ScheduleJob', { job: { name: 'any-json', due_time: '1h', data: json } });
      await call('ScheduleJob', { job: { name: 'any-own', due_time: '1h', data: text } });
      const back = (name: string) => call<{ job: { data: { type_url: string; value: Uint8Array } } }>('GetJob', { name }).then((r) => ({ type_url: r.job.data.type_url, value: Buffer.from(r.job.data.value) }));
      expect(await back('any-json')).toEqual(json);
      expect(await back('any-own')).toEqual(text);
      await call('ScheduleJob', { job: { name: 'any-fire', due_time: '0s', data: json }, overwrite: true });
      const got = await waitFor(() => app.received.find((r) => r.name === 'any-fire'), 5000, 'trigger');
      expect(got.body).toBe(json.value.toString());
    } finally {
      api.close();
    }
  });

  it('sends each trigger to one sidecar of the app when several are connected', async () => {
    const app2 = await startRecordingApp();
    const sc2 = await sidecarFor({ appPort: app2.port, dataDir: dir.path, appId: 'grpc-app', schedulerAddresses: [`127.0.0.1:${opts.port}`] });
    try {
      await waitFor(() => sc2.ctx.metadata.snapshot().scheduler.connected_addresses.length === 1, 5000, 'second sidecar connected');
      for (let i = 0; i < 40; i++) expect((await postJob(sc.base, `spread-${i}`, { dueTime: '200ms', data: i })).status).toBe(204);
      const got = () => [...app.received, ...app2.received].filter((r) => r.name.startsWith('spread-'));
      await waitFor(() => got().length >= 40, 10_000, 'all 40 triggers');
      // every trigger acked (after its delivery), none waiting: no other can follow
      await waitFor(() => sched.engine.snapshot().inflight === 0 && sched.engine.snapshot().pending === 0, 10_000, 'every trigger acked');
      expect(got()).toHaveLength(40);
      expect(new Set(got().map((r) => r.name)).size).toBe(40);
      // both sidecars took a share
      expect(app.received.some((r) => r.name.startsWith('spread-'))).toBe(true);
      expect(app2.received.some((r) => r.name.startsWith('spread-'))).toBe(true);
    } finally {
      await sc2.close();
      await app2.close();
    }
  });

  it('holds app triggers until a sidecar with an app connects; an app-less sidecar takes only internal jobs', async () => {
    const other = await startRecordingApp();
    // no app port: this sidecar must not take the app's triggers (it could only fail them)
    const appless = await sidecarFor({ dataDir: dir.path, appId: 'offline-app', schedulerAddresses: [`127.0.0.1:${opts.port}`] });
    let reader: Awaited<ReturnType<typeof sidecarFor>> | undefined;
    try {
      await waitFor(() => appless.ctx.metadata.snapshot().scheduler.connected_addresses.length === 1, 5000, 'app-less sidecar connected');
      const internal: string[] = [];
      appless.ctx.services.internalJobs!.onTrigger('workflows', async (t) => {
        internal.push(t.name);
      });
      await appless.ctx.services.internalJobs!.scheduleOnce('workflows', 'timer', Date.now() + 50, null);
      expect((await postJob(appless.base, 'waiting', { dueTime: '50ms', data: 'held' })).status).toBe(204);
      await waitFor(() => internal.length === 1, 5000, 'internal trigger at the app-less sidecar');
      // the app's trigger came due and waits in the scheduler: no sidecar of the app can take it
      await waitFor(() => sched.engine.snapshot().pending >= 1, 5000, 'the app trigger held');
      reader = await sidecarFor({ appPort: other.port, dataDir: dir.path, appId: 'offline-app', schedulerAddresses: [`127.0.0.1:${opts.port}`] });
      const got = await waitFor(() => other.received.find((r) => r.name === 'waiting'), 10_000, 'held trigger');
      expect(JSON.parse(got.body)).toBe('held');
      expect(other.received.filter((r) => r.name === 'waiting')).toHaveLength(1);
    } finally {
      await reader?.close();
      await appless.close();
      await other.close();
    }
  });

  it('answers malformed gRPC calls with INVALID_ARGUMENT and the error code', async () => {
    const Ctor = schedulerService();
    const raw = new Ctor(`127.0.0.1:${opts.port}`, grpc.credentials.createInsecure()) as unknown as Record<string, (...a: unknown[]) => unknown> & grpc.Client;
    try {
      const unary = (method: string, req: unknown) =>
        new Promise<grpc.ServiceError | null>((resolve) => (raw[method] as (r: unknown, cb: (e: grpc.ServiceError | null) => void) => void).call(raw, req, (e) => resolve(e)));
      const noKey = await unary('ScheduleJob', { job: { dueTime: '1s' } });
      expect(noKey?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(noKey?.metadata.get('rt-error-code')).toEqual(['RT_SCHEDULER_JOB_NAME_EMPTY']);
      const badCron = await unary('ScheduleJob', { key: { namespace: 'n', appId: 'a', name: 'x' }, job: { schedule: '* * * * * * *' } });
      expect(badCron?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(badCron?.details).toMatch(/has 7 fields/);
      const stream = (raw.WatchJobs as () => grpc.ClientDuplexStream<unknown, unknown>).call(raw);
      const err = await new Promise<grpc.ServiceError>((resolve) => {
        stream.on('error', (e: grpc.ServiceError) => resolve(e));
        stream.on('data', () => undefined);
        stream.write({ hello: { namespace: '', appId: '' } });
      });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.metadata.get('rt-error-code')).toEqual(['RT_SCHEDULER_APP_ID']);
    } finally {
      raw.close();
    }
  });

  it('survives a scheduler restart: reconnects, keeps jobs, delivers what came due meanwhile', async () => {
    expect((await postJob(sc.base, 'across-restart', { dueTime: '600ms', data: 7 })).status).toBe(204);
    await sched.close();
    const down = await postJob(sc.base, 'while-down', { dueTime: '1s' });
    expect(down.status).toBe(500);
    expect(((await down.json()) as { errorCode: string }).errorCode).toBe('RT_SCHEDULER_SCHEDULE_JOB');
    // it came due while the scheduler was down: the restarted one runs on a clock the test moves past that
    const clock = new ManualClock(Date.now());
    sched = await startScheduler({ ...opts, clock }, silent);
    await clock.advance(1000);
    const got = await waitFor(() => app.received.find((r) => r.name === 'across-restart'), 10_000, 'trigger after restart');
    expect(JSON.parse(got.body)).toBe(7);
    expect(await metadataAddresses()).toEqual([`127.0.0.1:${opts.port}`]);
  });
});
