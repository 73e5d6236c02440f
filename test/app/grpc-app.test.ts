/**
 * The sidecar toward an app that speaks gRPC (--app-protocol grpc), with the real @dapr/dapr
 * DaprServer over gRPC as the app:
 * - app health checks probe AppCallbackHealthCheck/HealthCheck (an HTTP GET of the health path,
 *   which a gRPC server cannot answer, kept its subscriptions from ever opening);
 * - input-binding events go through AppCallback.OnBindingEvent;
 * - job triggers go through AppCallback.OnJobEvent, or AppCallbackAlpha.OnJobEventAlpha1 when the app lacks it.
 * A gRPC server without these services, or no server, fails them.
 */
import type { DaprServer } from '@dapr/dapr';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppChannel } from '../../sidecar/src/app/channel.ts';
import type { SidecarOptions } from '../../sidecar/src/options.ts';
import { DEFAULT_OPTIONS } from '../../sidecar/src/sidecar.ts';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { postJob, sidecarFor, tempDir, waitFor, waitJobDone } from '../jobs/helpers.ts';
import { daprGrpcServer } from '../services/dapr-server.ts';
import { freePort } from '../services/net.ts';
import { component, startPubSubSidecar, type PubSubSidecar } from '../pubsub/helpers.ts';

const APP_PROTO_DIR = join(import.meta.dirname, '../../sidecar/src/app/proto');
const silent = pino({ level: 'silent' });

let sc: PubSubSidecar | undefined;
let server: DaprServer | undefined;
let bare: grpc.Server | undefined;
let barePort = 0;
const got: unknown[] = [];
const bindingEvents: unknown[] = [];
let appPort = 0;
const channels: AppChannel[] = [];

function channel(port: number, extra: Partial<SidecarOptions> = {}): AppChannel {
  const c = new AppChannel({ ...DEFAULT_OPTIONS, appId: 'grpc-app-test', appPort: port, appProtocol: 'grpc', appHealthCheck: true, appHealthProbeTimeoutMs: 500, ...extra } as SidecarOptions, silent);
  channels.push(c);
  return c;
}

beforeAll(async () => {
  appPort = await freePort();
  sc = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), {
    appId: 'grpc-app',
    appPort,
    appProtocol: 'grpc',
    appHealthCheck: true,
    appHealthProbeIntervalMs: 200,
    appHealthProbeTimeoutMs: 500,
  });
  server = daprGrpcServer(appPort, sc.sidecar.grpcPort);
  await server.pubsub.subscribe('mem', 'orders', async (data: unknown) => void got.push(data));
  await server.binding.receive('orders-in', async (data: unknown) => void bindingEvents.push(data));
  await server.start();
  bare = new grpc.Server();
  barePort = await new Promise<number>((res, rej) => bare!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
}, 30_000);

afterAll(async () => {
  for (const c of channels) await c.close();
  await sc?.close();
  await server?.stop().catch(() => undefined);
  if (bare) await new Promise<void>((r) => bare!.tryShutdown(() => r()));
});

describe('app health checks for a gRPC app', () => {
  it('the sidecar finds the DaprServer healthy and opens its subscriptions', async () => {
    // the programmatic subscriptions are asked for only once the app is healthy
    let md: { subscriptions: { topic: string; type: string }[] } = { subscriptions: [] };
    const end = Date.now() + 10_000;
    while (!md.subscriptions.length && Date.now() < end) {
      md = (await (await fetch(`${sc!.base}/v1.0/metadata`)).json()) as typeof md;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(md.subscriptions).toEqual(expect.arrayContaining([expect.objectContaining({ topic: 'orders', type: 'PROGRAMMATIC' })]));
    expect(await channel(appPort).waitUntilReachable(2000)).toBe(true);
  });

  it('a healthy gRPC app gets its events', async () => {
    const res = await fetch(`${sc!.base}/v1.0/publish/mem/orders`, { method: 'POST', body: JSON.stringify({ n: 1 }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(204);
    const end = Date.now() + 10_000;
    while (got.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual([{ n: 1 }]);
  });

  it('a gRPC server without the health service is not healthy (UNIMPLEMENTED)', async () => {
    expect(await channel(barePort).waitUntilReachable(600)).toBe(false);
  });

  it('no server at all is not healthy, and the wait ends on time', async () => {
    const start = Date.now();
    expect(await channel(await freePort()).waitUntilReachable(600)).toBe(false);
    expect(Date.now() - start).toBeLessThan(3000);
  });
});

describe('input-binding events to a gRPC app', () => {
  it('go through OnBindingEvent with their data', async () => {
    const reply = await channel(appPort).deliverBinding('orders-in', { data: Buffer.from(JSON.stringify({ order: 7 })), metadata: { source: 'test' } });
    expect(reply.status).toBe(200);
    expect(bindingEvents).toEqual([{ order: 7 }]);
  });

  it('an app without OnBindingEvent answers 404, no app at all 500', async () => {
    expect((await channel(barePort).deliverBinding('orders-in', { data: Buffer.from('x'), metadata: {} })).status).toBe(404);
    const gone = await channel(await freePort()).deliverBinding('orders-in', { data: Buffer.from('x'), metadata: {} });
    expect(gone.status).toBe(500);
  });
});

describe('job triggers to a gRPC app', () => {
  interface JobEvent {
    name: string;
    data: { '@type'?: string; [k: string]: unknown } | null;
    method: string;
    dueTime?: string;
  }
  const events: JobEvent[] = [];
  let fail = new Set<string>();
  let jobsApp: grpc.Server | undefined;
  let jobsSidecar: (Awaited<ReturnType<typeof sidecarFor>>) | undefined;
  const dir = tempDir('rt-grpc-jobs-');

  beforeAll(async () => {
    // an app server with OnJobEventAlpha1, from the same public-shaped proto
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, json: true, includeDirs: [APP_PROTO_DIR, PROTO_DIR] });
    const alpha = (def['dapr.proto.runtime.v1.AppCallbackAlpha'] as grpc.ServiceDefinition);
    jobsApp = new grpc.Server();
    jobsApp.addService(alpha, {
      OnJobEventAlpha1: (call: grpc.ServerUnaryCall<JobEvent, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        events.push({ ...call.request, dueTime: call.metadata.get('rt-job-due-time')[0] as string | undefined });
        if (fail.has(call.request.name)) cb({ code: grpc.status.INTERNAL, details: 'not now' });
        else cb(null, {});
      },
    });
    const port = await new Promise<number>((res, rej) => jobsApp!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    jobsSidecar = await sidecarFor({ appPort: port, appProtocol: 'grpc', dataDir: dir.path });
  }, 30_000);
  afterAll(async () => {
    await jobsSidecar?.close();
    if (jobsApp) await new Promise<void>((r) => jobsApp!.tryShutdown(() => r()));
    dir.remove();
  });

  it('arrive through OnJobEventAlpha1 with the data as an Any and the due time', async () => {
    expect((await postJob(jobsSidecar!.base, 'report', { dueTime: '0s', data: { kind: 'daily', n: 2 } })).status).toBe(204);
    expect((await postJob(jobsSidecar!.base, 'note', { dueTime: '0s', data: 'plain text' })).status).toBe(204);
    await waitFor(() => events.length >= 2, 10_000, 'two job events');
    const byName = Object.fromEntries(events.map((e) => [e.name, e]));
    expect(byName.report).toMatchObject({ method: 'job/report', data: { '@type': 'type.googleapis.com/google.protobuf.Value' } });
    expect(JSON.stringify(byName.report.data)).toContain('daily');
    expect(byName.note.data).toMatchObject({ '@type': 'type.googleapis.com/google.protobuf.StringValue', value: 'plain text' });
    expect(new Date(byName.report.dueTime!).getTime()).toBeGreaterThan(0);
  });

  it('a failed call is retried by the failure policy', async () => {
    fail = new Set(['flaky']);
    expect((await postJob(jobsSidecar!.base, 'flaky', { dueTime: '0s', failurePolicy: { constant: { interval: '100ms', maxRetries: 2 } } })).status).toBe(204);
    await waitFor(() => events.filter((e) => e.name === 'flaky').length >= 2, 10_000, 'a retry');
    fail = new Set();
  });

  it('an app with the stable AppCallback.OnJobEvent gets them there, not through the alpha name', async () => {
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, json: true, includeDirs: [APP_PROTO_DIR, PROTO_DIR] });
    const got: { rpc: string; name: string }[] = [];
    const app = new grpc.Server();
    const record = (rpc: string) => (call: grpc.ServerUnaryCall<JobEvent, unknown>, cb: grpc.sendUnaryData<unknown>) => (got.push({ rpc, name: call.request.name }), cb(null, {}));
    app.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, { OnJobEvent: record('OnJobEvent') });
    app.addService(def['dapr.proto.runtime.v1.AppCallbackAlpha'] as grpc.ServiceDefinition, { OnJobEventAlpha1: record('OnJobEventAlpha1') });
    const port = await new Promise<number>((res, rej) => app.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    const d = tempDir('rt-grpc-jobs-stable-');
    const sidecar = await sidecarFor({ appPort: port, appProtocol: 'grpc', dataDir: d.path });
    try {
      expect((await postJob(sidecar.base, 'stable', { dueTime: '0s', data: { n: 1 } })).status).toBe(204);
      await waitFor(() => got.length >= 1, 10_000, 'the job event');
      await waitJobDone(sidecar.base, 'stable'); // acked: no other call for it can follow
      expect(got).toEqual([{ rpc: 'OnJobEvent', name: 'stable' }]);
    } finally {
      await sidecar.close();
      await new Promise<void>((r) => app.tryShutdown(() => r()));
      d.remove();
    }
  });
});
