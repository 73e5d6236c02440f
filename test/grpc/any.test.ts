/**
 * Job data through the real protobuf encodings it travels in (no sidecar: the conversions of
 * sidecar/src/grpc/runtime/any.ts and sidecar/src/jobs/data.ts over the runtime API's and the
 * scheduler's own messages):
 * - any Any (any type_url, empty included, any bytes) scheduled over gRPC comes back from GetJob
 *   and in a scheduler Trigger with the same type_url and bytes;
 * - data written as JSON (HTTP) answered as an Any and scheduled again shows the same JSON;
 * - the HTTP view and the HTTP app's body of any Any never fail.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyIn, anyOut, jsonToAny, type AnyMsg } from '../../sidecar/src/grpc/runtime/any.ts';
import { runtimeService } from '../../sidecar/src/grpc/runtime/proto.ts';
import { dataBody, dataView } from '../../sidecar/src/jobs/data.ts';
import { fromPbJob, fromPbTrigger, schedulerService, toPbJob, toPbTrigger, type PbJob, type PbTrigger } from '../../scheduler/src/grpc/proto.ts';
import type { JobSpec } from '../../scheduler/src/types.ts';

const runtime = runtimeService();
const scheduler = schedulerService().service;
const T = 'type.googleapis.com/google.protobuf.';

/** A ScheduleJob request's Any as the sidecar decodes it (the client encodes what a caller gives). */
function scheduled(data: AnyMsg | null): AnyMsg | null {
  const bytes = runtime.ScheduleJob.requestSerialize({ job: { name: 'j', due_time: '1h', data } });
  return (runtime.ScheduleJob.requestDeserialize(bytes) as { job: { data: AnyMsg | null } }).job.data;
}

/** Spec → scheduler ScheduleJob request → the spec the `rt scheduler` stores. */
function throughScheduler(spec: JobSpec): JobSpec {
  const bytes = scheduler.ScheduleJob.requestSerialize({ key: { namespace: 'n', appId: 'a', owner: '', name: 'j' }, job: toPbJob(spec) });
  return fromPbJob((scheduler.ScheduleJob.requestDeserialize(bytes) as { job: PbJob }).job);
}

/** The Any a GetJob answer carries, as a caller decodes it. */
function answered(spec: JobSpec): AnyMsg | null {
  const bytes = runtime.GetJob.responseSerialize({ job: { name: 'j', data: anyOut(spec) } });
  return (runtime.GetJob.responseDeserialize(bytes) as { job: { data: AnyMsg | null } }).job.data;
}

const typeUrl = fc.oneof(fc.constant(''), fc.constantFrom(`${T}StringValue`, `${T}Value`, `${T}Struct`, `${T}BytesValue`, `${T}Int64Value`, 'type.googleapis.com/shop.Order'), fc.string({ maxLength: 40 }));
const bytes = fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.json({ maxDepth: 3 }).map((j) => new TextEncoder().encode(j)));

describe('job data: an Any scheduled over gRPC', () => {
  it('comes back from GetJob and in a trigger with the same type_url and bytes, through the scheduler proto', () => {
    fc.assert(
      fc.property(typeUrl, bytes, (url, value) => {
        const data = anyIn(scheduled({ type_url: url, value: Buffer.from(value) }));
        if (url === '' && value.length === 0) {
          // an Any with neither is no data
          expect(data).toBeUndefined();
          return;
        }
        const spec = throughScheduler({ dueTime: '1h', dataAny: data });
        const back = answered(spec);
        expect(back?.type_url).toBe(url);
        expect(Buffer.from(back?.value as Uint8Array)).toEqual(Buffer.from(value));

        const wire = scheduler.WatchJobs.responseSerialize({ triggers: [toPbTrigger({ id: 't', key: { namespace: 'n', appId: 'a', owner: '', name: 'j' }, dataAny: spec.dataAny, dueAt: 1, attempt: 0 })] });
        const trigger = fromPbTrigger((scheduler.WatchJobs.responseDeserialize(wire) as { triggers: PbTrigger[] }).triggers[0]);
        expect(trigger.dataAny).toEqual(data);
        expect(anyOut(trigger)).toEqual({ type_url: url, value: Buffer.from(value) });
      }),
      { numRuns: 500 },
    );
  });

  it('has an HTTP view that is JSON and an HTTP body, whatever its bytes', () => {
    fc.assert(
      fc.property(typeUrl, bytes, (url, value) => {
        const spec = { dataAny: anyIn({ type_url: url, value: Buffer.from(value) }) };
        if (!spec.dataAny) return;
        const view = dataView(spec);
        expect(JSON.parse(JSON.stringify(view))).toEqual(view);
        const body = dataBody(spec);
        expect(typeof body === 'string' || Buffer.isBuffer(body)).toBe(true);
        // bytes with an empty type_url (the SDKs' jobs examples) reach an HTTP app unchanged
        if (url === '') expect(Buffer.from(body)).toEqual(Buffer.from(value));
      }),
      { numRuns: 500 },
    );
  });

  it('is shown over HTTP as JSON where it is JSON, else as {"@type", "value": base64}', () => {
    const view = (url: string, value: Buffer | string) => dataView({ dataAny: anyIn({ type_url: url, value: Buffer.from(value) }) });
    expect(view('', '{"task":"x","n":42}')).toEqual({ task: 'x', n: 42 });
    expect(view('', 'not json')).toEqual({ '@type': '', value: Buffer.from('not json').toString('base64') });
    expect(view('', Buffer.from([0xff, 0xfe]))).toEqual({ '@type': '', value: '//4=' });
    // StringValue "hi": field 1, length 2
    expect(view(`${T}StringValue`, Buffer.from([0x0a, 0x02, 0x68, 0x69]))).toBe('hi');
    expect(view('type.googleapis.com/shop.Order', Buffer.from([1, 2]))).toEqual({ '@type': 'type.googleapis.com/shop.Order', value: 'AQI=' });
    // a Value type_url over bytes that are no Value: shown as the bytes, not failed
    expect(view(`${T}Value`, Buffer.from([0x0f]))).toEqual({ '@type': `${T}Value`, value: 'Dw==' });
  });
});

describe('job data written as JSON (the HTTP API)', () => {
  it('answered as an Any and scheduled again over gRPC, shows the same JSON', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), (text) => {
        const stored = JSON.stringify(JSON.parse(text));
        const again = anyIn(scheduled(answered({ dataJson: stored })));
        // -0 has no JSON spelling of its own: it is stored as 0 either way
        expect(JSON.stringify(dataView({ dataAny: again }))).toBe(JSON.stringify(JSON.parse(stored)));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps "__proto__", "constructor" and "toString" keys as data', () => {
    for (const stored of ['[{"__proto__":{}}]', '{"__proto__":{"a":1},"constructor":2,"toString":"x"}']) {
      expect(JSON.stringify(dataView({ dataAny: anyIn(scheduled(answered({ dataJson: stored }))) }))).toBe(stored);
    }
  });

  it('an own type stored by earlier rt versions as {"@type", "value"} still reads back as that Any; look-alikes stay a Value', () => {
    const old = answered({ dataJson: JSON.stringify({ '@type': 'type.googleapis.com/shop.Order', value: 'AAEC/w==' }) });
    expect(old?.type_url).toBe('type.googleapis.com/shop.Order');
    expect(Buffer.from(old?.value as Uint8Array)).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(jsonToAny(JSON.stringify({ '@type': 'x/y', value: 'not base64!' }))?.['@type']).toBe(`${T}Value`);
    expect(jsonToAny(JSON.stringify({ '@type': 'no-slash', value: 'AA==' }))?.['@type']).toBe(`${T}Value`);
  });
});
