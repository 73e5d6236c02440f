/**
 * Job data scheduled over the gRPC runtime API is kept as the Any that was sent (the bug found
 * with the Python SDK's jobs example: an empty type_url and JSON bytes came back, and reached the
 * app, as a google.protobuf.Value). Real sidecars on their in-process scheduler, raw grpc-js
 * clients with our protos; a real gRPC app server (AppCallbackAlpha.OnJobEventAlpha1, decoded
 * without unpacking Any, so the bytes it sees are the bytes on the wire) and a real HTTP app.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import * as protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR, runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { sidecarFor, tempDir, waitFor } from '../jobs/helpers.ts';

const APP_PROTO_DIR = join(import.meta.dirname, '../../sidecar/src/app/proto');
const T = 'type.googleapis.com/google.protobuf.';

/** A well-known type's bytes, encoded by protobufjs from its bundled descriptors. */
const wellKnown = new protobuf.Root();
for (const f of ['google/protobuf/struct.proto', 'google/protobuf/wrappers.proto']) wellKnown.addJSON(protobuf.common.get(f)!.nested!);
const encode = (name: string, obj: Record<string, unknown>) => {
  const t = wellKnown.lookupType(`google.protobuf.${name}`);
  return Buffer.from(t.encode(t.fromObject(obj)).finish());
};

interface AnyBytes {
  type_url: string;
  value: Buffer;
}

const PAYLOAD = JSON.stringify({ task_type: 'data_processing', priority: 'high', items: 42, source: 'test_data' });

/** name → [the Any scheduled, the body an HTTP app gets, what GET /v1.0-alpha1/jobs/<name> shows as data] */
const CASES: Record<string, [AnyBytes, Buffer, unknown]> = {
  // the Python SDK's jobs example: Any() with only value = json.dumps(...).encode()
  'json-bytes': [{ type_url: '', value: Buffer.from(PAYLOAD) }, Buffer.from(PAYLOAD), JSON.parse(PAYLOAD)],
  'text-bytes': [{ type_url: '', value: Buffer.from('not json') }, Buffer.from('not json'), { '@type': '', value: Buffer.from('not json').toString('base64') }],
  'binary-bytes': [{ type_url: '', value: Buffer.from([0xff, 0x00, 0xfe]) }, Buffer.from([0xff, 0x00, 0xfe]), { '@type': '', value: '/wD+' }],
  'string-value': [{ type_url: `${T}StringValue`, value: encode('StringValue', { value: 'hello world' }) }, Buffer.from('hello world'), 'hello world'],
  'value-number': [{ type_url: `${T}Value`, value: encode('Value', { numberValue: 123 }) }, Buffer.from('123'), 123],
  'value-string': [{ type_url: `${T}Value`, value: encode('Value', { stringValue: 'true' }) }, Buffer.from('"true"'), 'true'],
  'bytes-value': [{ type_url: `${T}BytesValue`, value: encode('BytesValue', { value: Buffer.from('hello') }) }, Buffer.from('hello'), { '@type': `${T}BytesValue`, value: encode('BytesValue', { value: Buffer.from('hello') }).toString('base64') }],
  'int64-value': [{ type_url: `${T}Int64Value`, value: encode('Int64Value', { value: 123 }) }, Buffer.from('123'), 123],
  'own-type': [{ type_url: 'type.googleapis.com/shop.Order', value: Buffer.from([8, 7, 0x12, 1, 0x41]) }, Buffer.from([8, 7, 0x12, 1, 0x41]), { '@type': 'type.googleapis.com/shop.Order', value: Buffer.from([8, 7, 0x12, 1, 0x41]).toString('base64') }],
};

type Call = <T>(method: string, req: unknown) => Promise<T>;
function caller(port: number): { call: Call; close(): void } {
  const Client = runtimeClient();
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as Record<string, (r: unknown, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void> & grpc.Client;
  return {
    call: <T>(method: string, req: unknown) => new Promise<T>((res, rej) => client[method].call(client, req, { deadline: Date.now() + 10_000 }, (e, r) => (e ? rej(e) : res(r as T)))),
    close: () => client.close(),
  };
}

const asBytes = (a: unknown): AnyBytes => {
  const o = a as { type_url: string; value: Uint8Array };
  return { type_url: o.type_url, value: Buffer.from(o.value) };
};

describe('job data scheduled over gRPC, delivered to a gRPC app', () => {
  const dir = tempDir('rt-job-data-grpc-');
  const events: { name: string; data: AnyBytes | null; method: string }[] = [];
  let app: grpc.Server;
  let sc: Awaited<ReturnType<typeof sidecarFor>>;
  let api: ReturnType<typeof caller>;

  beforeAll(async () => {
    // json: false, so the app sees every Any as {type_url, value} bytes, as an SDK's server does
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, json: false, includeDirs: [APP_PROTO_DIR, PROTO_DIR] });
    app = new grpc.Server();
    app.addService(def['dapr.proto.runtime.v1.AppCallbackAlpha'] as grpc.ServiceDefinition, {
      OnJobEventAlpha1: (call: grpc.ServerUnaryCall<{ name: string; data: unknown; method: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        events.push({ name: call.request.name, data: call.request.data ? asBytes(call.request.data) : null, method: call.request.method });
        cb(null, {});
      },
    });
    const port = await new Promise<number>((res, rej) => app.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    sc = await sidecarFor({ appId: 'job-data-grpc', appPort: port, appProtocol: 'grpc', dataDir: dir.path });
    api = caller(sc.grpcPort);
  }, 30_000);
  afterAll(async () => {
    api?.close();
    await sc?.close();
    if (app) await new Promise<void>((r) => app.tryShutdown(() => r()));
    dir.remove();
  });

  it('GetJob, GetJobAlpha1 and ListJobs give back the type_url and bytes scheduled', async () => {
    for (const [name, [data]] of Object.entries(CASES)) await api.call('ScheduleJob', { job: { name: `get-${name}`, due_time: '1h', data }, overwrite: false });
    const listed = new Map((await api.call<{ jobs: { name: string; data: unknown }[] }>('ListJobs', {})).jobs.map((j) => [j.name, asBytes(j.data)]));
    for (const [name, [data]] of Object.entries(CASES)) {
      expect({ name, data: asBytes((await api.call<{ job: { data: unknown } }>('GetJob', { name: `get-${name}` })).job.data) }).toEqual({ name, data });
      expect(asBytes((await api.call<{ job: { data: unknown } }>('GetJobAlpha1', { name: `get-${name}` })).job.data)).toEqual(data);
      expect(listed.get(`get-${name}`)).toEqual(data);
    }
  });

  it('the HTTP API shows the data as JSON where it is JSON, else as {"@type", "value": base64}', async () => {
    for (const [name, [data, , view]] of Object.entries(CASES)) {
      await api.call('ScheduleJob', { job: { name: `view-${name}`, due_time: '1h', data }, overwrite: false });
      const got = (await (await fetch(`${sc.base}/v1.0-alpha1/jobs/view-${name}`)).json()) as { data: unknown };
      expect({ name, data: got.data }).toEqual({ name, data: view });
    }
  });

  it("OnJobEventAlpha1 gets the Any as scheduled (the SDK example's json.loads works)", async () => {
    for (const [name, [data]] of Object.entries(CASES)) await api.call('ScheduleJobAlpha1', { job: { name: `fire-${name}`, due_time: '0s', data }, overwrite: false });
    await waitFor(() => Object.keys(CASES).every((n) => events.some((e) => e.name === `fire-${n}`)), 10_000, 'every job event');
    for (const [name, [data]] of Object.entries(CASES)) {
      const e = events.find((x) => x.name === `fire-${name}`)!;
      expect({ name, data: e.data, method: e.method }).toEqual({ name, data, method: `job/fire-${name}` });
    }
    const sdkExample = events.find((e) => e.name === 'fire-json-bytes')!;
    expect(JSON.parse(sdkExample.data!.value.toString('utf8'))).toEqual(JSON.parse(PAYLOAD));
  });

  it('property: any type_url and bytes reach GetJob and the app unchanged', { timeout: 60_000 }, async () => {
    let n = 0;
    const typeUrl = fc.oneof(fc.constant(''), fc.constantFrom(`${T}StringValue`, `${T}Value`, `${T}Struct`, `${T}BytesValue`, 'type.googleapis.com/shop.Order'), fc.string({ maxLength: 30 }));
    const bytes = fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 48 }), fc.json({ maxDepth: 2 }).map((j) => new TextEncoder().encode(j)));
    await fc.assert(
      fc.asyncProperty(typeUrl, bytes, async (url, value) => {
        const name = `prop-${n++}`;
        const data = { type_url: url, value: Buffer.from(value) };
        await api.call('ScheduleJob', { job: { name, due_time: '0s', data }, overwrite: true });
        const event = await waitFor(() => events.find((e) => e.name === name), 10_000, name);
        expect(event.data).toEqual(data);
      }),
      { numRuns: 60 },
    );
    // and read back before it fires
    await fc.assert(
      fc.asyncProperty(typeUrl, bytes, async (url, value) => {
        const data = { type_url: url, value: Buffer.from(value) };
        await api.call('ScheduleJob', { job: { name: 'prop-get', due_time: '1h', data }, overwrite: true });
        expect(asBytes((await api.call<{ job: { data: unknown } }>('GetJob', { name: 'prop-get' })).job.data)).toEqual(data);
      }),
      { numRuns: 100 },
    );
  });
});

describe('job data scheduled over gRPC, delivered to an HTTP app', () => {
  const dir = tempDir('rt-job-data-http-');
  const bodies = new Map<string, { body: Buffer; contentType?: string }>();
  let app: Server;
  let sc: Awaited<ReturnType<typeof sidecarFor>>;
  let api: ReturnType<typeof caller>;

  beforeAll(async () => {
    app = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const m = /^\/job\/(.+)$/.exec(req.url ?? '');
        if (m) bodies.set(decodeURIComponent(m[1]), { body: Buffer.concat(chunks), contentType: req.headers['content-type'] });
        res.end();
      });
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    sc = await sidecarFor({ appId: 'job-data-http', appPort: (app.address() as { port: number }).port, dataDir: dir.path });
    api = caller(sc.grpcPort);
  }, 30_000);
  afterAll(async () => {
    api?.close();
    await sc?.close();
    app?.closeAllConnections();
    if (app) await new Promise((r) => app.close(r));
    dir.remove();
  });

  it('POST /job/<name> carries the JSON of a Value, the text or bytes of a wrapper, else the bytes as sent', async () => {
    for (const [name, [data]] of Object.entries(CASES)) await api.call('ScheduleJob', { job: { name, due_time: '0s', data }, overwrite: false });
    // a job written over HTTP still gets its JSON
    await fetch(`${sc.base}/v1.0-alpha1/jobs/from-http`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '0s', data: { a: 'b' } }) });
    await waitFor(() => Object.keys(CASES).every((n) => bodies.has(n)) && bodies.has('from-http'), 10_000, 'every job call');
    for (const [name, [, body]] of Object.entries(CASES)) {
      expect({ name, body: bodies.get(name)!.body }).toEqual({ name, body });
      expect(bodies.get(name)!.contentType).toBe('application/json');
    }
    expect(JSON.parse(bodies.get('from-http')!.body.toString())).toEqual({ a: 'b' });
  });
});
