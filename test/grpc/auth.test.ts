/**
 * The API token on the gRPC runtime API (rt-api-token or dapr-api-token metadata, the SDK's
 * daprApiToken), and the UNIMPLEMENTED answers of building blocks rt does not have.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNSUPPORTED_METHODS } from '../../sidecar/src/grpc/runtime/unsupported.ts';
import { startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

const TOKEN = 'grpc-api-test-token-0123456789';
let s: RuntimeSidecar;
beforeAll(async () => {
  s = await startRuntimeSidecar({ apiToken: TOKEN });
});
afterAll(async () => {
  await s?.stop();
});

const METHODS: [string, unknown][] = [
  ['GetState', { store_name: 'mem', key: 'a' }],
  ['SaveState', { store_name: 'mem', states: [{ key: 'a', value: Buffer.from('1') }] }],
  ['GetBulkState', { store_name: 'mem', keys: ['a'] }],
  ['DeleteState', { store_name: 'mem', key: 'a' }],
  ['DeleteBulkState', { store_name: 'mem', states: [{ key: 'a' }] }],
  ['ExecuteStateTransaction', { storeName: 'mem', operations: [] }],
  ['QueryStateAlpha1', { store_name: 'mem', query: '{}' }],
  ['InvokeBinding', { name: 'b', operation: 'create' }],
  ['GetSecret', { store_name: 'vault', key: 'db-password' }],
  ['GetBulkSecret', { store_name: 'vault' }],
  ['GetMetadata', {}],
  ['SetMetadata', { key: 'k', value: 'v' }],
  ['Shutdown', {}],
  ['ScheduleJobAlpha1', { job: { name: 'j', due_time: '1h' } }],
  ['GetJobAlpha1', { name: 'j' }],
  ['DeleteJobAlpha1', { name: 'j' }],
  ['ListJobsAlpha1', {}],
  ['DeleteJobsByPrefixAlpha1', {}],
  ['ScheduleJob', { job: { name: 'j', due_time: '1h' } }],
  ['GetJob', { name: 'j' }],
  ['DeleteJob', { name: 'j' }],
  ['ListJobs', {}],
  ['DeleteJobsByPrefix', {}],
  ['StartWorkflowBeta1', { workflow_name: 'w' }],
  ['GetWorkflowAlpha1', { instance_id: 'w' }],
  ['PurgeWorkflowBeta1', { instance_id: 'w' }],
];

describe('API token on the gRPC runtime API', () => {
  it('every method answers UNAUTHENTICATED without the token or with a wrong one, and nothing changes', async () => {
    for (const [method, req] of METHODS) {
      const attempts: (Record<string, string> | undefined)[] = [undefined, { 'rt-api-token': 'wrong' }, { 'dapr-api-token': `${TOKEN}x` }];
      for (const md of attempts) {
        const e = await s.fail(method, req, md);
        expect({ method, code: e.code }).toEqual({ method, code: grpc.status.UNAUTHENTICATED });
      }
    }
    // the unauthenticated Shutdown above did not stop anything; the unauthenticated save did not write
    const md = await s.call<{ id: string }>('GetMetadata', {}, { 'rt-api-token': TOKEN });
    expect(md.id).toBe('grpc-api');
    expect((await s.call<{ data: Buffer }>('GetState', { store_name: 'mem', key: 'a' }, { 'dapr-api-token': TOKEN })).data.length).toBe(0);
  });

  it('accepts the token in rt-api-token and dapr-api-token', async () => {
    await s.call('SaveState', { store_name: 'mem', states: [{ key: 'tok', value: Buffer.from('"yes"') }] }, { 'rt-api-token': TOKEN });
    const got = await s.call<{ data: Buffer }>('GetState', { store_name: 'mem', key: 'tok' }, { 'dapr-api-token': TOKEN });
    expect(got.data.toString()).toBe('"yes"');
  });

  it('the @dapr/dapr SDK works with daprApiToken; a call without the token fails', async () => {
    const good = s.sdk(TOKEN);
    await good.state.save('mem', [{ key: 'sdk-tok', value: { a: 1 } }]);
    expect(await good.state.get('mem', 'sdk-tok')).toEqual({ a: 1 });
    const raw = s.client;
    const e = await new Promise<grpc.ServiceError>((resolve) =>
      raw.makeUnaryRequest('/dapr.proto.runtime.v1.Dapr/GetMetadata', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), new grpc.Metadata(), (err) => resolve(err as grpc.ServiceError)),
    );
    expect(e.code).toBe(grpc.status.UNAUTHENTICATED);
  });
});

describe('building blocks rt does not have', () => {
  it('answer UNIMPLEMENTED naming the missing block', async () => {
    const md = { 'rt-api-token': TOKEN };
    for (const [method, block] of [
      ['SubtleSignAlpha1', 'subtle cryptography'],
      ['SubtleEncryptAlpha1', 'subtle cryptography'],
      ['ConverseAlpha2', 'conversation'],
    ]) {
      const e = await s.raw(method, Buffer.from([0x0a, 0x01, 0x61]), md).catch((x: grpc.ServiceError) => x);
      expect(e).toBeInstanceOf(Error);
      const err = e as grpc.ServiceError;
      expect({ method, code: err.code }).toEqual({ method, code: grpc.status.UNIMPLEMENTED });
      expect(err.details).toContain(`no ${block}`);
      // and what it does serve: every block rt has, pub/sub and service invocation included
      expect(err.details).toContain('serves state, pub/sub, service invocation, bindings, secrets, configuration, cryptography, distributed lock, metadata, jobs, workflows and actors');
    }
    expect(UNSUPPORTED_METHODS.length).toBeGreaterThan(8);
  });

  it('streaming ones too (bidi); a served server or bidi stream checks the token first', async () => {
    const md = new grpc.Metadata();
    md.set('rt-api-token', TOKEN);
    const id = (b: Buffer) => b;
    const serverStream = s.client.makeServerStreamRequest('/dapr.proto.runtime.v1.Dapr/SubscribeConfiguration', id, id, Buffer.alloc(0), new grpc.Metadata());
    const e1 = await new Promise<grpc.ServiceError>((resolve) => serverStream.on('error', resolve));
    expect(e1.code).toBe(grpc.status.UNAUTHENTICATED);
    const bidi = s.client.makeBidiStreamRequest('/dapr.proto.runtime.v1.Dapr/EncryptAlpha1', id, id, new grpc.Metadata());
    const e2 = await new Promise<grpc.ServiceError>((resolve) => bidi.on('error', resolve));
    expect(e2.code).toBe(grpc.status.UNAUTHENTICATED);
    const actors = s.client.makeBidiStreamRequest('/dapr.proto.runtime.v1.Dapr/SubscribeActorEventsAlpha1', id, id, md);
    const e3 = await new Promise<grpc.ServiceError>((resolve) => actors.on('error', resolve));
    expect(e3.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(e3.details).toContain('no actor event streaming');
  });

  it('a method no version of the API has gets grpc-js UNIMPLEMENTED', async () => {
    const e = await s.raw('NoSuchMethod', Buffer.alloc(0), { 'rt-api-token': TOKEN }).catch((x: grpc.ServiceError) => x);
    expect((e as grpc.ServiceError).code).toBe(grpc.status.UNIMPLEMENTED);
  });
});
