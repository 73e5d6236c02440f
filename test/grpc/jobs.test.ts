/**
 * Jobs over the gRPC runtime API (raw grpc-js calls with our protos; the @dapr/dapr JS SDK has
 * no gRPC jobs client) on the sidecar's in-process scheduler, checked against the HTTP jobs
 * API of the same sidecar, including how HTTP shows job data scheduled as an Any
 * (docs/grpc-api.md; delivery of such data: job-data.test.ts).
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeWellKnown } from '../../sidecar/src/grpc/runtime/well-known.ts';
import { startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

let s: RuntimeSidecar;
let base: string;
beforeAll(async () => {
  s = await startRuntimeSidecar();
  base = `http://127.0.0.1:${s.sidecar.httpPort}/v1.0-alpha1/jobs`;
});
afterAll(async () => {
  await s?.stop();
});

const T = 'type.googleapis.com/google.protobuf.';
type Job = Record<string, unknown> & { name: string; data?: Record<string, unknown> | null };
type AnyOut = { type_url: string; value: Buffer };
/** What a job's Any holds, read as the well-known type its type_url names. */
const held = (data: unknown) => decodeWellKnown((data as AnyOut).type_url, (data as AnyOut).value)?.value;
const schedule = (job: Job, overwrite = false) => s.call('ScheduleJobAlpha1', { job, overwrite });
const getJob = async (name: string) => (await s.call<{ job: Job }>('GetJobAlpha1', { name })).job;
const httpJob = async (name: string) => (await (await fetch(`${base}/${encodeURIComponent(name)}`)).json()) as Record<string, unknown>;

describe('jobs over the gRPC API', () => {
  it('schedules, gets (gRPC and HTTP), lists and deletes', async () => {
    await schedule({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: { '@type': `${T}StringValue`, value: 'hello' } });
    const job = await getJob('j-str');
    expect(job).toMatchObject({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: { type_url: `${T}StringValue` } });
    expect(held(job.data)).toBe('hello');
    expect(job.due_time).toBeUndefined();
    expect(await httpJob('j-str')).toEqual({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: 'hello' });

    const list = await s.call<{ jobs: Job[] }>('ListJobsAlpha1', {});
    expect(list.jobs.map((j) => j.name)).toContain('j-str');

    await s.call('DeleteJobAlpha1', { name: 'j-str' });
    expect((await s.fail('GetJobAlpha1', { name: 'j-str' })).code).toBe(grpc.status.NOT_FOUND);
    // deleting what is not there succeeds, as the HTTP API's 204
    await s.call('DeleteJobAlpha1', { name: 'j-str' });
  });

  it('shows job data scheduled as an Any over HTTP as JSON where it is JSON', async () => {
    // google.protobuf.Value → the JSON value; read back as the same Value
    await schedule({
      name: 'j-value',
      due_time: '1h',
      data: { '@type': `${T}Value`, structValue: { fields: { n: { numberValue: 1.5 }, ok: { boolValue: true }, list: { listValue: { values: [{ stringValue: 'x' }, { nullValue: 0 }] } } } } },
    });
    expect((await httpJob('j-value')).data).toEqual({ n: 1.5, ok: true, list: ['x', null] });
    const v = await getJob('j-value');
    expect(v.data?.type_url).toBe(`${T}Value`);
    expect(held(v.data)).toEqual({ n: 1.5, ok: true, list: ['x', null] });

    // BytesValue holding JSON text, and a raw Any without type_url, as some SDKs send
    await schedule({ name: 'j-bytes', due_time: '1h', data: { '@type': `${T}BytesValue`, value: Buffer.from('{"order":7}') } });
    expect((await httpJob('j-bytes')).data).toEqual({ order: 7 });
    await schedule({ name: 'j-json', due_time: '1h', data: { type_url: '', value: Buffer.from('{"order":8}') } });
    expect((await httpJob('j-json')).data).toEqual({ order: 8 });
    // bytes that are not JSON: the Any's protojson shape, its bytes in base64
    await schedule({ name: 'j-raw', due_time: '1h', data: { type_url: '', value: Buffer.from('plain text') } });
    expect((await httpJob('j-raw')).data).toEqual({ '@type': '', value: Buffer.from('plain text').toString('base64') });
    expect((await getJob('j-raw')).data).toEqual({ type_url: '', value: Buffer.from('plain text') });

    // an Any of the caller's own type survives the round trip
    await schedule({ name: 'j-own', due_time: '1h', data: { type_url: 'type.googleapis.com/shop.Order', value: Buffer.from([0, 1, 2, 255]) } });
    const own = await getJob('j-own');
    expect(own.data?.type_url).toBe('type.googleapis.com/shop.Order');
    expect(Buffer.from(own.data?.value as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect((await httpJob('j-own')).data).toEqual({ '@type': 'type.googleapis.com/shop.Order', value: Buffer.from([0, 1, 2, 255]).toString('base64') });

    // a job written over HTTP reads back over gRPC: a number as Value
    const put = await fetch(`${base}/j-http`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '1h', data: 42 }) });
    expect(put.status).toBe(204);
    const fromHttp = (await getJob('j-http')).data;
    expect(fromHttp?.type_url).toBe(`${T}Value`);
    expect(held(fromHttp)).toBe(42);

    // no data: none stored, none returned
    await schedule({ name: 'j-none', due_time: '1h' });
    expect((await getJob('j-none')).data).toBeNull();
    expect(await httpJob('j-none')).toEqual({ name: 'j-none', dueTime: '1h' });
  });

  it('keeps the failure policy', async () => {
    await schedule({ name: 'j-fp', schedule: '@every 1h', failure_policy: { constant: { interval: { seconds: 2, nanos: 500_000_000 }, max_retries: 4 } } });
    expect((await getJob('j-fp')).failure_policy).toMatchObject({ constant: { interval: { seconds: 2, nanos: 500_000_000 }, max_retries: 4 } });
    expect((await httpJob('j-fp')).failurePolicy).toEqual({ constant: { interval: '2.5s', maxRetries: 4 } });
    await schedule({ name: 'j-fp', schedule: '@every 1h', failure_policy: { drop: {} } }, true);
    expect((await getJob('j-fp')).failure_policy).toMatchObject({ drop: {} });
  });

  it('overwrite: an existing name is ALREADY_EXISTS unless overwrite is set', async () => {
    await schedule({ name: 'j-dup', schedule: '@every 1h' });
    const e = await s.fail('ScheduleJobAlpha1', { job: { name: 'j-dup', schedule: '@every 2h' } });
    expect(e.code).toBe(grpc.status.ALREADY_EXISTS);
    await schedule({ name: 'j-dup', schedule: '@every 2h' }, true);
    expect((await getJob('j-dup')).schedule).toBe('@every 2h');
  });

  it('answers under the stable names (ScheduleJob, GetJob, ListJobs, DeleteJobsByPrefix, DeleteJob) as under the Alpha1 ones', async () => {
    await s.call('ScheduleJob', { job: { name: 'stable-1', schedule: '@every 1h', data: { type_url: '', value: Buffer.from('{"a":1}') } }, overwrite: false });
    expect((await s.fail('ScheduleJob', { job: { name: 'stable-1', schedule: '@every 1h' } })).code).toBe(grpc.status.ALREADY_EXISTS);
    const job = (await s.call<{ job: Job }>('GetJob', { name: 'stable-1' })).job;
    expect(job).toMatchObject({ name: 'stable-1', schedule: '@every 1h', data: { type_url: '', value: Buffer.from('{"a":1}') } });
    // one job store: what the stable name wrote, the Alpha1 name reads, and back
    expect((await getJob('stable-1')).data).toEqual(job.data);
    await schedule({ name: 'stable-2', due_time: '1h' });
    const listed = (await s.call<{ jobs: Job[] }>('ListJobs', {})).jobs.map((j) => j.name);
    expect(listed).toEqual(expect.arrayContaining(['stable-1', 'stable-2']));
    await s.call('DeleteJobsByPrefix', { name_prefix: 'stable-2' });
    expect((await s.fail('GetJob', { name: 'stable-2' })).code).toBe(grpc.status.NOT_FOUND);
    await s.call('DeleteJob', { name: 'stable-1' });
    expect((await s.fail('GetJobAlpha1', { name: 'stable-1' })).code).toBe(grpc.status.NOT_FOUND);
    expect((await s.fail('GetJob', { name: '' })).code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('deletes by prefix', async () => {
    for (const n of ['p-1', 'p-2', 'q-1']) await schedule({ name: n, due_time: '1h' });
    await s.call('DeleteJobsByPrefixAlpha1', { name_prefix: 'p-' });
    const names = (await s.call<{ jobs: Job[] }>('ListJobsAlpha1', {})).jobs.map((j) => j.name);
    expect(names).toContain('q-1');
    expect(names).not.toContain('p-1');
    expect(names).not.toContain('p-2');
  });

  it('bad jobs are INVALID_ARGUMENT with the scheduler validator message', async () => {
    const bad: [unknown, string][] = [
      [{}, 'job is required'],
      [{ job: { name: '', schedule: '@every 1h' } }, 'empty'],
      [{ job: { name: 'a/b', schedule: '@every 1h' } }, 'contains "/"'],
      [{ job: { name: 'no-when' } }, ''],
      [{ job: { name: 'bad-cron', schedule: '61 * * * * *' } }, ''],
      [{ job: { name: 'bad-due', due_time: 'tomorrow-ish' } }, ''],
      [{ job: { name: 'bad-fp', due_time: '1h', failure_policy: {} } }, 'drop'],
    ];
    for (const [req, text] of bad) {
      const e = await s.fail('ScheduleJobAlpha1', req);
      expect({ req, code: e.code }).toEqual({ req, code: grpc.status.INVALID_ARGUMENT });
      expect(e.details).toContain(text);
    }
    expect((await s.fail('GetJobAlpha1', { name: '' })).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await s.fail('DeleteJobAlpha1', { name: 'x\u0001' })).code).toBe(grpc.status.INVALID_ARGUMENT);
  });
});
