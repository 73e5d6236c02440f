/**
 * Jobs over the gRPC runtime API (raw grpc-js calls with our protos; the @dapr/dapr JS SDK has
 * no gRPC jobs client) on the sidecar's in-process scheduler, checked against the HTTP jobs
 * API of the same sidecar, including the Any ↔ JSON data mapping of docs/grpc-api.md.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
const schedule = (job: Job, overwrite = false) => s.call('ScheduleJobAlpha1', { job, overwrite });
const getJob = async (name: string) => (await s.call<{ job: Job }>('GetJobAlpha1', { name })).job;
const httpJob = async (name: string) => (await (await fetch(`${base}/${encodeURIComponent(name)}`)).json()) as Record<string, unknown>;

describe('jobs over the gRPC API', () => {
  it('schedules, gets (gRPC and HTTP), lists and deletes', async () => {
    await schedule({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: { '@type': `${T}StringValue`, value: 'hello' } });
    const job = await getJob('j-str');
    expect(job).toMatchObject({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: { '@type': `${T}StringValue`, value: 'hello' } });
    expect(job.due_time).toBeUndefined();
    expect(await httpJob('j-str')).toEqual({ name: 'j-str', schedule: '@every 1h', repeats: 3, ttl: '2h', data: 'hello' });

    const list = await s.call<{ jobs: Job[] }>('ListJobsAlpha1', {});
    expect(list.jobs.map((j) => j.name)).toContain('j-str');

    await s.call('DeleteJobAlpha1', { name: 'j-str' });
    expect((await s.fail('GetJobAlpha1', { name: 'j-str' })).code).toBe(grpc.status.NOT_FOUND);
    // deleting what is not there succeeds, as the HTTP API's 204
    await s.call('DeleteJobAlpha1', { name: 'j-str' });
  });

  it('maps job data between Any and the stored JSON', async () => {
    // google.protobuf.Value → the JSON value; read back as Value
    await schedule({
      name: 'j-value',
      due_time: '1h',
      data: { '@type': `${T}Value`, structValue: { fields: { n: { numberValue: 1.5 }, ok: { boolValue: true }, list: { listValue: { values: [{ stringValue: 'x' }, { nullValue: 0 }] } } } } },
    });
    expect((await httpJob('j-value')).data).toEqual({ n: 1.5, ok: true, list: ['x', null] });
    const v = await getJob('j-value');
    expect(v.data?.['@type']).toBe(`${T}Value`);
    expect(v.data?.structValue).toMatchObject({ fields: { n: { numberValue: 1.5 }, ok: { boolValue: true } } });

    // BytesValue holding JSON text, and a raw Any without type_url, as some SDKs send
    await schedule({ name: 'j-bytes', due_time: '1h', data: { '@type': `${T}BytesValue`, value: Buffer.from('{"order":7}') } });
    expect((await httpJob('j-bytes')).data).toEqual({ order: 7 });
    await schedule({ name: 'j-raw', due_time: '1h', data: { type_url: '', value: Buffer.from('plain text') } });
    expect((await httpJob('j-raw')).data).toBe('plain text');
    expect((await getJob('j-raw')).data).toMatchObject({ '@type': `${T}StringValue`, value: 'plain text' });

    // an Any of the caller's own type survives the round trip
    await schedule({ name: 'j-own', due_time: '1h', data: { type_url: 'type.googleapis.com/shop.Order', value: Buffer.from([0, 1, 2, 255]) } });
    const own = await getJob('j-own');
    expect(own.data?.type_url).toBe('type.googleapis.com/shop.Order');
    expect(Buffer.from(own.data?.value as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect((await httpJob('j-own')).data).toEqual({ '@type': 'type.googleapis.com/shop.Order', value: Buffer.from([0, 1, 2, 255]).toString('base64') });

    // a job written over HTTP reads back over gRPC: a number as Value
    const put = await fetch(`${base}/j-http`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '1h', data: 42 }) });
    expect(put.status).toBe(204);
    expect((await getJob('j-http')).data).toMatchObject({ '@type': `${T}Value`, numberValue: 42 });

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
      [{ job: { name: 'bad-data', due_time: '1h', data: { type_url: '', value: Buffer.from([0xff, 0xfe]) } } }, 'UTF-8'],
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
