/**
 * Invoking an app that speaks gRPC (--app-protocol grpc): the target's sidecar calls the app's
 * AppCallback.OnInvoke, as the ecosystem's SDK servers expect. The app is the real @dapr/dapr
 * DaprServer over gRPC (`server.invoker.listen`); callers use plain HTTP and the @dapr/dapr
 * client over gRPC (InvokeService). A raw grpc-js app shows the verb, query, metadata and error
 * mapping. Real sidecars in this process, found through a private registry (RT_HOME).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommunicationProtocolEnum, DaprClient, HttpMethod, type DaprServer } from '@dapr/dapr';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { daprGrpcServer, silentDaprLogger } from '../services/dapr-server.ts';
import { freePort } from '../services/net.ts';


interface OnInvokeRequest {
  method: string;
  data: { value: Buffer } | null;
  content_type: string;
  http_extension: { verb: number; querystring: string } | null;
}

describe('invoking an app that speaks gRPC (OnInvoke)', () => {
  let dir: string;
  const sidecars: Record<string, Sidecar> = {};
  let server: DaprServer | undefined;
  let raw: grpc.Server | undefined;
  const seen: { req: OnInvokeRequest; md: grpc.Metadata }[] = [];
  const prevHome = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-grpc-app-'));
    process.env.RT_HOME = join(dir, 'home');
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };

    // the SDK's server as the target app
    const sdkPort = await freePort();
    sidecars.sdk = await startSidecar({ ...common, appId: 'sdk-app', appPort: sdkPort, appProtocol: 'grpc' });
    server = daprGrpcServer(sdkPort, sidecars.sdk.grpcPort);
    await server.invoker.listen('orders/total', async ({ body }) => ({ total: (JSON.parse(body ?? '{}') as { items: number[] }).items.reduce((a, b) => a + b, 0) }), { method: HttpMethod.POST });
    await server.start();

    // a bare gRPC app that echoes what OnInvoke got, or fails with a chosen status
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '../../sidecar/src/app/proto'), PROTO_DIR] });
    raw = new grpc.Server();
    raw.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, {
      OnInvoke: (call: grpc.ServerUnaryCall<OnInvokeRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        seen.push({ req: call.request, md: call.metadata });
        if (call.request.method === 'missing') return cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' });
        cb(null, { data: { type_url: '', value: Buffer.from(`echo:${call.request.data?.value.toString() ?? ''}`) }, content_type: 'text/plain' });
      },
    });
    const rawPort = await new Promise<number>((res, rej) => raw!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    sidecars.raw = await startSidecar({ ...common, appId: 'raw-app', appPort: rawPort, appProtocol: 'grpc' });
    sidecars.caller = await startSidecar({ ...common, appId: 'caller' });
  }, 30_000);

  afterAll(async () => {
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    await server?.stop().catch(() => undefined);
    if (raw) await new Promise<void>((r) => raw!.tryShutdown(() => r()));
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    await rm(dir, { recursive: true, force: true });
  });

  const invoke = (app: string, path: string, init: RequestInit = {}) => fetch(`http://127.0.0.1:${sidecars.caller.httpPort}/v1.0/invoke/${app}/method/${path}`, init);

  it("reaches the SDK server's invoker.listen handler over HTTP", async () => {
    const res = await invoke('sdk-app', 'orders/total', { method: 'POST', body: JSON.stringify({ items: [2, 3, 5] }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ total: 10 });
  });

  it("reaches it from the @dapr/dapr client over gRPC (InvokeService)", async () => {
    const client = new DaprClient({ daprHost: '127.0.0.1', daprPort: String(sidecars.caller.grpcPort), communicationProtocol: CommunicationProtocolEnum.GRPC, logger: silentDaprLogger });
    try {
      expect(await client.invoker.invoke('sdk-app', 'orders/total', HttpMethod.POST, { items: [1, 1] })).toEqual({ total: 2 });
    } finally {
      await client.stop();
    }
  });

  it('hands the app the method, verb, query, body, content type and caller id', async () => {
    seen.length = 0;
    const res = await invoke('raw-app', 'things/7?a=1&b=2', { method: 'PUT', body: 'hello', headers: { 'content-type': 'text/plain', 'x-trace': 't1' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain');
    expect(await res.text()).toBe('echo:hello');
    const { req, md } = seen[0];
    expect(req).toMatchObject({ method: 'things/7', content_type: 'text/plain', http_extension: { verb: 4, querystring: 'a=1&b=2' } });
    expect(md.get('x-trace')).toEqual(['t1']);
    expect(md.get('dapr-caller-app-id')).toEqual(['caller']);
  });

  it('refuses a body over the 64 MiB one gRPC message holds with 413, and goes on serving', async () => {
    const big = Buffer.alloc(65 * 1024 * 1024, 0x61);
    const res = await invoke('raw-app', 'things/big', { method: 'POST', body: big, headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ errorCode: 'ERR_REQUEST_TOO_LARGE', message: expect.stringContaining('OnInvoke') });
    const after = await invoke('raw-app', 'things/small', { method: 'POST', body: 'ok', headers: { 'content-type': 'text/plain' } });
    expect(await after.text()).toBe('echo:ok');
  });

  it("maps the app's gRPC error to its HTTP status, with the status as JSON", async () => {
    const res = await invoke('raw-app', 'missing', { method: 'GET' });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ code: grpc.status.NOT_FOUND, message: 'no such thing' });
  });
});
