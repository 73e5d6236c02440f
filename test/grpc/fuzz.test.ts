/**
 * Property tests of the gRPC runtime API through a real sidecar: random requests to every
 * method (random field values, then random bytes that are not even protobuf) never crash the
 * sidecar, and every answer is OK or a client-side error code — never INTERNAL or UNKNOWN,
 * since nothing here makes a component fail.
 */
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

let s: RuntimeSidecar;
beforeAll(async () => {
  s = await startRuntimeSidecar();
});
afterAll(async () => {
  await s?.stop();
});

const ACCEPTABLE = new Set([
  grpc.status.OK,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.NOT_FOUND,
  grpc.status.ABORTED,
  grpc.status.ALREADY_EXISTS,
  grpc.status.FAILED_PRECONDITION,
]);

const text = fc.oneof(fc.string({ maxLength: 20 }), fc.string({ unit: 'grapheme', maxLength: 12 }), fc.constantFrom('', 'a||b', '\0', 'x'.repeat(1500), '../x', 'a/b', '@every 1s', '1h'));
const storeName = fc.oneof(fc.constantFrom('mem', 'lite', 'vault', ''), text);
const md = fc.dictionary(fc.string({ maxLength: 10 }), fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('-1', 'x', '0', '99999999999')), { maxKeys: 3 }).map((m) => {
  // ttlInSeconds is the one key stores read; send it half of the time
  return m;
});
const bytes = fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b));
const enumNum = fc.integer({ min: -1, max: 4 });
const etag = fc.option(fc.record({ value: fc.oneof(text, fc.constantFrom('1', '2', '999')) }), { nil: null });
const options = fc.option(fc.record({ concurrency: enumNum, consistency: enumNum }), { nil: null });
const item = fc.record({ key: text, value: bytes, etag, metadata: md, options });
const anyData = fc.oneof(
  fc.constant(null),
  fc.record({ type_url: fc.oneof(fc.constant(''), text), value: bytes }),
  fc.record({ '@type': fc.constant('type.googleapis.com/google.protobuf.StringValue'), value: text }),
  fc.record({ '@type': fc.constant('type.googleapis.com/google.protobuf.Value'), numberValue: fc.double() }),
);
const wfReq = fc.record({ instance_id: text, workflow_component: fc.oneof(fc.constantFrom('', 'rt', 'dapr'), text) });

const request: fc.Arbitrary<[string, unknown]> = fc.oneof(
  fc.tuple(fc.constant('GetState'), fc.record({ store_name: storeName, key: text, consistency: enumNum, metadata: md })),
  fc.tuple(fc.constant('GetBulkState'), fc.record({ store_name: storeName, keys: fc.array(text, { maxLength: 4 }), parallelism: fc.integer(), metadata: md })),
  fc.tuple(fc.constant('SaveState'), fc.record({ store_name: storeName, states: fc.array(item, { maxLength: 3 }) })),
  fc.tuple(fc.constant('DeleteState'), fc.record({ store_name: storeName, key: text, etag, options, metadata: md })),
  fc.tuple(fc.constant('DeleteBulkState'), fc.record({ store_name: storeName, states: fc.array(item, { maxLength: 3 }) })),
  fc.tuple(
    fc.constant('ExecuteStateTransaction'),
    fc.record({ storeName, operations: fc.array(fc.record({ operationType: fc.oneof(fc.constantFrom('upsert', 'delete'), text), request: fc.option(item, { nil: null }) }), { maxLength: 3 }), metadata: md }),
  ),
  fc.tuple(fc.constant('QueryStateAlpha1'), fc.record({ store_name: storeName, query: fc.oneof(text, fc.json({ maxDepth: 3 })), metadata: md })),
  fc.tuple(fc.constant('InvokeBinding'), fc.record({ name: text, data: bytes, metadata: md, operation: text })),
  fc.tuple(fc.constant('GetSecret'), fc.record({ store_name: storeName, key: text, metadata: md })),
  fc.tuple(fc.constant('GetBulkSecret'), fc.record({ store_name: storeName, metadata: md })),
  fc.tuple(fc.constant('GetMetadata'), fc.constant({})),
  fc.tuple(fc.constant('SetMetadata'), fc.record({ key: text, value: text })),
  fc.tuple(
    fc.constant('ScheduleJobAlpha1'),
    fc.record({
      job: fc.option(fc.record({ name: text, schedule: fc.option(text, { nil: undefined }), due_time: fc.option(text, { nil: undefined }), ttl: fc.option(text, { nil: undefined }), repeats: fc.option(fc.nat(), { nil: undefined }), data: anyData }, { requiredKeys: ['name'] }), { nil: null }),
      overwrite: fc.boolean(),
    }),
  ),
  fc.tuple(fc.constantFrom('GetJobAlpha1', 'DeleteJobAlpha1'), fc.record({ name: text })),
  fc.tuple(fc.constant('DeleteJobsByPrefixAlpha1'), fc.record({ name_prefix: fc.constantFrom('zz-none-', 'fuzz-none') })),
  fc.tuple(fc.constant('ListJobsAlpha1'), fc.constant({})),
  fc.tuple(fc.constantFrom('StartWorkflowBeta1', 'StartWorkflowAlpha1'), fc.record({ instance_id: text, workflow_component: fc.oneof(fc.constantFrom('', 'rt'), text), workflow_name: text, input: bytes })),
  fc.tuple(fc.constantFrom('GetWorkflowBeta1', 'TerminateWorkflowBeta1', 'PauseWorkflowAlpha1', 'ResumeWorkflowBeta1', 'PurgeWorkflowAlpha1'), wfReq),
  fc.tuple(fc.constant('RaiseEventWorkflowBeta1'), fc.record({ instance_id: text, workflow_component: fc.constant('rt'), event_name: text, event_data: bytes })),
);

async function codeOf(p: Promise<unknown>): Promise<{ code: number; details?: string }> {
  try {
    await p;
    return { code: grpc.status.OK };
  } catch (e) {
    const err = e as grpc.ServiceError;
    return { code: err.code, details: err.details };
  }
}

describe('gRPC runtime API properties', () => {
  it('random typed requests answer OK or a client error, never INTERNAL', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(request, async ([method, req]) => {
        const r = await codeOf(s.call(method, req));
        if (!ACCEPTABLE.has(r.code)) throw new Error(`${method} ${JSON.stringify(req)} → ${r.code} ${r.details}`);
        if (r.code === grpc.status.INVALID_ARGUMENT) expect(r.details?.length).toBeGreaterThan(5);
      }),
      { numRuns: 300 },
    );
    expect(((await s.call('GetMetadata', {})) as { id: string }).id).toBe('grpc-api');
  });

  it('bytes that are not the method message answer INVALID_ARGUMENT or OK, never INTERNAL', { timeout: 60_000 }, async () => {
    const methods = Object.keys(s.client.constructor.prototype).filter((m) => /^[A-Z]/.test(m) && m !== 'Shutdown');
    expect(methods).toContain('GetState');
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), fc.uint8Array({ minLength: 1, maxLength: 64 }), async (method, body) => {
        const r = await codeOf(s.raw(method, Buffer.from(body)));
        if (!ACCEPTABLE.has(r.code)) throw new Error(`${method} ${Buffer.from(body).toString('hex')} → ${r.code} ${r.details}`);
      }),
      { numRuns: 200 },
    );
    // a tag with wire type 7, which protobuf does not have: the decode fails
    const bad = await codeOf(s.raw('GetState', Buffer.from([0x0f])));
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(bad.details).toContain('not a valid protobuf message');
    // a message quoting half of a surrogate pair (JSON.parse does) is still answered
    const astral = await codeOf(s.call('QueryStateAlpha1', { store_name: 'mem', query: '\u{10000}' }));
    expect(astral.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(((await s.call('GetMetadata', {})) as { id: string }).id).toBe('grpc-api');
  });
});
