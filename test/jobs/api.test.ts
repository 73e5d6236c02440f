import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJob, sidecarFor, startRecordingApp, tempDir, waitFor, waitJobDone, type RecordingApp } from './helpers.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';

describe('jobs API on the embedded scheduler', () => {
  let app: RecordingApp;
  let sc: Sidecar & { base: string };
  const dir = tempDir();

  beforeAll(async () => {
    app = await startRecordingApp();
    sc = await sidecarFor({ appPort: app.port, dataDir: dir.path });
  });
  afterAll(async () => {
    await sc?.close();
    await app?.close();
    dir.remove();
  });

  it('schedules a one-shot job and delivers its data once to POST /job/<name>', async () => {
    const res = await postJob(sc.base, 'once', { dueTime: '200ms', data: { hello: 'world', n: 1 } });
    expect(res.status).toBe(204);
    const got = await waitFor(() => app.received.find((r) => r.name === 'once'), 5000, 'trigger');
    expect(JSON.parse(got.body)).toEqual({ hello: 'world', n: 1 });
    expect(got.contentType).toContain('application/json');
    // the fire's due time travels with it (the app's idempotency key, with the name)
    expect(Math.abs(Date.parse(got.dueTime!) - got.at)).toBeLessThan(2000);
    // a finished one-shot is gone: no fire can follow
    await waitJobDone(sc.base, 'once');
    expect(app.received.filter((r) => r.name === 'once')).toHaveLength(1);
    const get = await fetch(`${sc.base}/v1.0-alpha1/jobs/once`);
    expect(get.status).toBe(500);
    const body = (await get.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('RT_SCHEDULER_GET_JOB');
    expect(body.message).toMatch(/not found/);
  });

  it('returns the job as stored, omitting absent fields, for any JSON data', async () => {
    for (const [i, data] of [42, 'text', [1, 'two', null], { deep: { a: [true] } }, null, 1.5].entries()) {
      expect((await postJob(sc.base, `data-${i}`, { schedule: '@every 1h', data, repeats: 3 })).status).toBe(204);
      const got = (await (await fetch(`${sc.base}/v1.0-alpha1/jobs/data-${i}`)).json()) as Record<string, unknown>;
      expect(got).toEqual({ name: `data-${i}`, schedule: '@every 1h', repeats: 3, data });
    }
    expect((await postJob(sc.base, 'nodata', { dueTime: '1h' })).status).toBe(204);
    expect(await (await fetch(`${sc.base}/v1.0/jobs/nodata`)).json()).toEqual({ name: 'nodata', dueTime: '1h' });
    expect((await postJob(sc.base, 'withttl', { schedule: '0 0 0 * * *', ttl: '2h', dueTime: '1h' })).status).toBe(204);
    expect(await (await fetch(`${sc.base}/v1.0-alpha1/jobs/withttl`)).json()).toEqual({ name: 'withttl', schedule: '0 0 0 * * *', ttl: '2h', dueTime: '1h' });
  });

  it('answers 409 for an existing job without overwrite, and replaces it with overwrite', async () => {
    expect((await postJob(sc.base, 'dup', { dueTime: '1h', data: 1 })).status).toBe(204);
    const again = await postJob(sc.base, 'dup', { dueTime: '1h', data: 2 });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { errorCode: string }).errorCode).toBe('RT_SCHEDULER_JOB_EXISTS');
    expect((await postJob(sc.base, 'dup', { dueTime: '1h', data: 3, overwrite: true })).status).toBe(204);
    expect(((await (await fetch(`${sc.base}/v1.0-alpha1/jobs/dup`)).json()) as { data: number }).data).toBe(3);
  });

  it('deletes (204 also when missing) and lists the app jobs', async () => {
    expect((await postJob(sc.base, 'del-me', { dueTime: '1h' })).status).toBe(204);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/del-me`, { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/del-me`, { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/del-me`)).status).toBe(500);
    const list = (await (await fetch(`${sc.base}/v1.0-alpha1/jobs`)).json()) as { jobs: { name: string }[] };
    const names = list.jobs.map((j) => j.name);
    expect(names).toContain('nodata');
    expect(names).not.toContain('del-me');
  });

  it('rejects bad names and bad fields with 400 naming the field', async () => {
    const cases: [string, unknown, string, RegExp][] = [
      ['a%2Fb', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /contains "\/"/],
      ['a%5Cb', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /contains "\\"/],
      ['a%23b', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /contains "#"/],
      ['a%3Fb', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /contains "\?"/],
      ['a%01b', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /control character/],
      ['a%7Cb', { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /contains "\|"/],
      ['x'.repeat(513), { dueTime: '1s' }, 'RT_SCHEDULER_JOB_NAME', /513 characters/],
      ['ok', {}, 'RT_SCHEDULER_SCHEDULE_EMPTY', /schedule.*dueTime/],
      ['ok', { schedule: '61 * * * * *' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /field 1 \(seconds\).*0-59/],
      ['ok', { schedule: '0 0 0 32 * *' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /field 4 \(day of month\).*1-31/],
      ['ok', { schedule: '0 0 0 1 13 *' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /field 5 \(month\).*1-12/],
      ['ok', { schedule: '0 0 0 * * 9' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /field 6 \(day of week\).*0-6/],
      ['ok', { schedule: '* * * * *' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /has 5 fields/],
      ['ok', { schedule: '@every banana' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /@every needs a duration/],
      ['ok', { schedule: '@fortnightly' }, 'RT_SCHEDULER_SCHEDULE_INVALID', /not a known period/],
      ['ok', { dueTime: 'tomorrow' }, 'RT_SCHEDULER_DUE_TIME_INVALID', /^dueTime:/],
      ['ok', { dueTime: '2026-02-30T00:00:00Z' }, 'RT_SCHEDULER_DUE_TIME_INVALID', /day 30/],
      ['ok', { dueTime: 'R5/PT1S' }, 'RT_SCHEDULER_DUE_TIME_INVALID', /repeating/],
      ['ok', { dueTime: '-5s' }, 'RT_SCHEDULER_DUE_TIME_INVALID', /negative/],
      ['ok', { dueTime: 5 }, 'RT_SCHEDULER_DUE_TIME_INVALID', /must be a string/],
      ['ok', { dueTime: '10s', ttl: '5s' }, 'RT_SCHEDULER_TTL_INVALID', /ends before dueTime/],
      ['ok', { schedule: '@every 1s', ttl: '2000-01-01T00:00:00Z' }, 'RT_SCHEDULER_TTL_INVALID', /already past/],
      ['ok', { schedule: '@every 1s', repeats: 0 }, 'RT_SCHEDULER_REPEATS_INVALID', /repeats/],
      ['ok', { schedule: '@every 1s', repeats: 1.5 }, 'RT_SCHEDULER_REPEATS_INVALID', /whole number/],
      ['ok', { schedule: '@every 1s', repeats: '3' }, 'RT_SCHEDULER_REPEATS_INVALID', /whole number/],
      ['ok', { schedule: '@every 1s', failurePolicy: { constant: { interval: 'x' } } }, 'RT_SCHEDULER_FAILURE_POLICY_INVALID', /interval/],
      ['ok', { schedule: '@every 1s', overwrite: 'yes' }, 'ERR_MALFORMED_REQUEST', /overwrite/],
    ];
    for (const [name, body, code, msg] of cases) {
      const res = await postJob(sc.base, name, body);
      const text = await res.text();
      expect(res.status, `${name} ${JSON.stringify(body)} → ${text}`).toBe(400);
      const err = JSON.parse(text) as { errorCode: string; message: string; details: unknown[] };
      expect(err.errorCode, text).toBe(code);
      expect(err.message, text).toMatch(msg);
      expect(Array.isArray(err.details)).toBe(true);
    }
  });

  it('rejects non-object and non-JSON bodies with 400', async () => {
    for (const [body, type] of [
      ['[1]', 'application/json'],
      ['"x"', 'application/json'],
      ['{bad', 'application/json'],
      ['', 'text/plain'],
      ['not json', 'text/plain'],
    ] as const) {
      const res = await fetch(`${sc.base}/v1.0-alpha1/jobs/b`, { method: 'POST', headers: { 'content-type': type }, body });
      expect(res.status, `${type} ${body}`).toBe(400);
      expect(((await res.json()) as { errorCode: string }).errorCode).toMatch(/^(ERR_MALFORMED_REQUEST|RT_SCHEDULER_)/);
    }
    expect((await fetch(`${sc.base}/v1.0-alpha1/jobs/`, { method: 'GET' })).status).toBe(400);
  });

  it('accepts the {"job": {...}} wrapper of earlier alpha clients', async () => {
    expect((await postJob(sc.base, 'wrapped', { job: { dueTime: '1h', data: 'w' } })).status).toBe(204);
    expect(await (await fetch(`${sc.base}/v1.0-alpha1/jobs/wrapped`)).json()).toEqual({ name: 'wrapped', dueTime: '1h', data: 'w' });
  });
});
