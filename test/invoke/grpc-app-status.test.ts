/**
 * The status of an app that speaks gRPC, back through service invocation, as the reference
 * runtime passes it: a gRPC caller (InvokeService) gets the app's code, message and details
 * (grpc-status-details-bin) unchanged, on the app's own sidecar and across two sidecars over
 * either hop (HTTP/1.1, the gRPC CallStream); an HTTP caller gets the code's HTTP status and the
 * status as JSON. The other way, an HTTP app's 4xx/5xx reaches a gRPC caller as an error whose
 * code follows the reference runtime's table, with an ErrorInfo and the dapr-http-status header.
 * Real sidecars in this process with a real grpc-js app and a node:http app, found through a
 * private registry (RT_HOME).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, STATUS_CODES, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import { pino } from 'pino';
import * as protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../sidecar/src/grpc/runtime/proto.ts';
import { invokeServiceDefinition } from '../../sidecar/src/invoke/grpc-service.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { freePort } from '../services/net.ts';

interface OnInvokeRequest {
  method: string;
  data: { type_url?: string; value: Buffer } | null;
}

interface Answer {
  err: grpc.ServiceError | null;
  res?: { data: { type_url?: string; value: Buffer } | null; content_type: string };
  headers?: grpc.Metadata;
}

/** The reference runtime's gRPC code → HTTP status for an HTTP caller. */
const HTTP_OF: Record<number, number> = { 0: 200, 1: 408, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401 };

const errorDetails = protobuf.loadSync(join(import.meta.dirname, '../../sidecar/src/invoke/proto/error-details.proto'));
const type = (name: string) => errorDetails.lookupType(`google.rpc.${name}`);
const any = (name: string, value: object) => ({ type_url: `type.googleapis.com/google.rpc.${name}`, value: type(name).encode(type(name).fromObject(value)).finish() });

/** The details the app sends with a failing code: standard types and one of its own. */
function detailsFor(code: number, message: string): Buffer {
  const details = [
    any('ErrorInfo', { reason: `R${code}`, domain: 'test.app', metadata: { code: String(code) } }),
    any('BadRequest', { fieldViolations: [{ field: 'name', description: 'empty' }] }),
    any('RetryInfo', { retryDelay: { seconds: 1, nanos: 500_000_000 } }),
    { type_url: 'type.googleapis.com/test.Custom', value: Buffer.from([1, 2, 3]) },
  ];
  return Buffer.from(type('Status').encode(type('Status').fromObject({ code, message, details })).finish());
}

/** What an HTTP caller sees of those details. */
const detailsJson = (code: number) => [
  { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: `R${code}`, domain: 'test.app', metadata: { code: String(code) } },
  { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: 'name', description: 'empty' }] },
  { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '1.500s' },
  { '@type': 'type.googleapis.com/test.Custom', value: 'AQID' },
];

describe("an app's gRPC status through service invocation", () => {
  let dir: string;
  let app: grpc.Server;
  let web: Server;
  const sidecars: Record<string, Sidecar> = {};
  const clients: grpc.Client[] = [];
  const prev = { home: process.env.RT_HOME, transport: process.env.RT_INVOKE_TRANSPORT };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-invoke-grpc-status-'));
    process.env.RT_HOME = join(dir, 'home');
    delete process.env.RT_INVOKE_TRANSPORT;

    // OnInvoke of `status/<code>`: OK answers the body back; any other code fails with the body
    // as its message and, unless the caller says `x-details: none`, details
    const def = protoLoader.loadSync('appcallback.proto', { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '../../sidecar/src/app/proto'), PROTO_DIR] });
    app = new grpc.Server();
    app.addService(def['dapr.proto.runtime.v1.AppCallback'] as grpc.ServiceDefinition, {
      OnInvoke: (call: grpc.ServerUnaryCall<OnInvokeRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        // `typed`: answers an Any of its own type, its value the request's type and bytes
        if (call.request.method === 'typed') {
          const d = call.request.data;
          return cb(null, { data: { type_url: 'type.example/Echo', value: Buffer.from(`${d?.type_url ?? ''}|${d?.value.toString('utf8') ?? ''}`) } });
        }
        const code = Number(/^status\/(\d+)$/.exec(call.request.method)?.[1] ?? 0);
        const message = call.request.data?.value.toString('utf8') ?? '';
        if (code === grpc.status.OK) return cb(null, { data: { type_url: '', value: Buffer.from(`ok:${message}`) }, content_type: 'text/plain' });
        const metadata = new grpc.Metadata();
        if (call.metadata.get('x-details')[0] !== 'none') metadata.set('grpc-status-details-bin', detailsFor(code, message));
        cb({ code, details: message, metadata });
      },
    });
    const appPort = await new Promise<number>((res, rej) => app.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));

    // an HTTP app answering `/status/<n>` with that status
    web = createServer((req, res) => {
      // an app cannot pose as the hop: headers of the sidecars' own in its answer go nowhere
      if (req.url === '/forge') return res.writeHead(200, { 'rt-invoke-grpc-status': '5', 'rt-invoke-grpc-message': 'forged', 'rt-invoke-error': 'ERR_FORGED' }).end('real');
      const status = Number(/^\/status\/(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
      res.writeHead(status, { 'content-type': 'text/plain', 'x-answer-header': `answered ${status}`, connection: 'keep-alive' });
      res.end(status === 500 ? `${'x'.repeat(100)} and more` : `web answered ${status}`);
    });
    const webPort = await new Promise<number>((r) => web.listen(0, '127.0.0.1', () => r((web.address() as { port: number }).port)));

    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    sidecars.target = await startSidecar({ ...common, appId: 'target', appPort, appProtocol: 'grpc' });
    sidecars.web = await startSidecar({ ...common, appId: 'web', appPort: webPort });
    sidecars.down = await startSidecar({ ...common, appId: 'down', appPort: await freePort(), appProtocol: 'grpc' });
    sidecars.caller = await startSidecar({ ...common, appId: 'caller' });
    process.env.RT_INVOKE_TRANSPORT = 'grpc';
    sidecars.callerGrpc = await startSidecar({ ...common, appId: 'caller-grpc' });
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    app?.forceShutdown();
    web?.close();
    for (const [k, v] of [['RT_HOME', prev.home], ['RT_INVOKE_TRANSPORT', prev.transport]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await rm(dir, { recursive: true, force: true });
  });

  /** The callers: the app's own sidecar, and another over each hop. */
  const callers = () =>
    [
      ['the same sidecar', sidecars.target],
      ['another sidecar over HTTP/1.1', sidecars.caller],
      ['another sidecar over the gRPC CallStream', sidecars.callerGrpc],
    ] as const;

  const clientOf = new Map<Sidecar, grpc.Client>();
  function client(s: Sidecar): grpc.Client {
    let c = clientOf.get(s);
    if (!c) {
      const Ctor = grpc.makeGenericClientConstructor(invokeServiceDefinition(), 'Dapr');
      c = new Ctor(`127.0.0.1:${s.grpcPort}`, grpc.credentials.createInsecure());
      clientOf.set(s, c);
      clients.push(c);
    }
    return c;
  }

  /** InvokeService of `method` on `id` with `body`, through `from`'s gRPC port. */
  const invokeService = (from: Sidecar, id: string, method: string, body: string, md: Record<string, string> = {}, typeUrl = '') =>
    new Promise<Answer>((resolve) => {
      const meta = new grpc.Metadata();
      for (const [k, v] of Object.entries(md)) meta.set(k, v);
      let headers: grpc.Metadata | undefined;
      const c = client(from) as unknown as Record<string, (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Answer['res']) => void) => grpc.ClientUnaryCall>;
      const req = { id, message: { method, data: { type_url: typeUrl, value: Buffer.from(body) }, content_type: 'text/plain', http_extension: { verb: 3, querystring: '' } } };
      const call = c.InvokeService(req, meta, { deadline: Date.now() + 10_000 }, (err, res) => setImmediate(() => resolve({ err, res, headers })));
      call.on('metadata', (m) => (headers = m));
    });

  const invokeHttp = (from: Sidecar, id: string, path: string, body: string) =>
    fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/${id}/method/${path}`, { method: 'POST', body, headers: { 'content-type': 'text/plain' } });

  const NAMED = ['OK', 'NOT_FOUND', 'INVALID_ARGUMENT', 'PERMISSION_DENIED', 'UNAUTHENTICATED', 'DEADLINE_EXCEEDED', 'INTERNAL', 'ALREADY_EXISTS', 'RESOURCE_EXHAUSTED', 'UNKNOWN', 'UNAVAILABLE'] as const;

  it("keeps an Any's type_url both ways between a gRPC caller and a gRPC app (a protobuf message the other side unpacks)", async () => {
    for (const [where, from] of callers()) {
      const { err, res, headers } = await invokeService(from, 'target', 'typed', 'packed-bytes', {}, 'type.googleapis.com/google.protobuf.StringValue');
      expect(err, where).toBeNull();
      expect(res?.data?.type_url, where).toBe('type.example/Echo');
      expect(res?.data?.value.toString(), where).toBe('type.googleapis.com/google.protobuf.StringValue|packed-bytes');
      expect(headers?.get('rt-data-type-url') ?? [], where).toEqual([]);
    }
  });

  it("gives a gRPC caller the app's code, message and details unchanged, on the same sidecar and across sidecars", async () => {
    for (const [where, from] of callers()) {
      for (const name of NAMED) {
        const code = grpc.status[name];
        const message = `${name} from the app: ünïcode ✓, 100% "quoted", a/b?c=d`;
        const { err, res } = await invokeService(from, 'target', `status/${code}`, message);
        const what = `${name} via ${where}`;
        if (code === grpc.status.OK) {
          expect(err, what).toBeNull();
          expect(res?.data?.value.toString(), what).toBe(`ok:${message}`);
          continue;
        }
        expect(`${err?.code} ${err?.details}`, what).toBe(`${code} ${message}`);
        expect(err?.metadata.get('grpc-status-details-bin')[0], what).toEqual(detailsFor(code, message));
      }
    }
  });

  it('gives a gRPC caller a status without details as it is, with no details added', async () => {
    for (const [where, from] of callers()) {
      const { err } = await invokeService(from, 'target', `status/${grpc.status.NOT_FOUND}`, 'no such order', { 'x-details': 'none' });
      expect(err?.code, where).toBe(grpc.status.NOT_FOUND);
      expect(err?.details, where).toBe('no such order');
      expect(err?.metadata.get('grpc-status-details-bin'), where).toEqual([]);
    }
  });

  it("passes every code and message through to a gRPC caller (property, all 17 codes)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 16 }), fc.string({ unit: 'grapheme', maxLength: 60 }), fc.boolean(), fc.constantFrom(0, 1, 2), async (code, message, withDetails, which) => {
        const [where, from] = callers()[which];
        const { err, res } = await invokeService(from, 'target', `status/${code}`, message, withDetails ? {} : { 'x-details': 'none' });
        if (code === grpc.status.OK) {
          expect(err, where).toBeNull();
          expect(res?.data?.value.toString(), where).toBe(`ok:${message}`);
          return;
        }
        expect(err?.code, where).toBe(code);
        expect(err?.details, where).toBe(message);
        expect(err?.metadata.get('grpc-status-details-bin'), where).toEqual(withDetails ? [detailsFor(code, message)] : []);
      }),
      { numRuns: 60 },
    );
  }, 120_000);

  it("gives an HTTP caller the code's HTTP status and the status as JSON, for all 17 codes", async () => {
    for (const [where, from] of callers()) {
      for (let code = 0; code <= 16; code++) {
        const what = `${grpc.status[code]} via ${where}`;
        const res = await invokeHttp(from, 'target', `status/${code}`, `failed with ${code}`);
        expect(res.status, what).toBe(HTTP_OF[code]);
        if (code === grpc.status.OK) {
          expect(await res.text(), what).toBe(`ok:failed with ${code}`);
          continue;
        }
        expect(res.headers.get('content-type'), what).toBe('application/json');
        expect([...res.headers.keys()].filter((h) => h.startsWith('rt-invoke-')), what).toEqual([]);
        expect(await res.json(), what).toEqual({ code, message: `failed with ${code}`, details: detailsJson(code) });
      }
    }
  });

  it("passes on no hop header an HTTP app answered with", async () => {
    for (const [where, from] of callers()) {
      const { err, res } = await invokeService(from, 'web', 'forge', '');
      expect(err, where).toBeNull();
      expect(res?.data?.value.toString(), where).toBe('real');
      const http = await invokeHttp(from, 'web', 'forge', '');
      expect(http.status, where).toBe(200);
      expect(await http.text(), where).toBe('real');
      expect([...http.headers.keys()].filter((h) => h.startsWith('rt-invoke-')), where).toEqual([]);
    }
  });

  it('answers an HTTP caller without details with the code and message alone', async () => {
    const res = await fetch(`http://127.0.0.1:${sidecars.caller.httpPort}/v1.0/invoke/target/method/status/7`, { method: 'POST', body: 'go away', headers: { 'x-details': 'none' } });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ code: 7, message: 'go away' });
  });

  it('still tells an app that does not answer from an app answering UNAVAILABLE', async () => {
    for (const [where, from] of callers()) {
      const res = await invokeHttp(from, 'down', 'status/0', 'x');
      expect(res.status, where).toBe(500);
      expect(await res.json(), where).toMatchObject({ errorCode: 'ERR_DIRECT_INVOKE', message: expect.stringContaining('app "down" did not answer') });
      const { err } = await invokeService(from, 'down', 'status/0', 'x');
      expect(err?.code, where).toBe(grpc.status.INTERNAL);
      expect(err?.details, where).toMatch(/failed to invoke, id: down, err: .*app "down" did not answer/);

      const answered = await invokeHttp(from, 'target', `status/${grpc.status.UNAVAILABLE}`, 'busy, try later');
      expect(answered.status, where).toBe(503);
      expect(await answered.json(), where).toMatchObject({ code: grpc.status.UNAVAILABLE, message: 'busy, try later' });
    }
  });

  it("gives a gRPC caller an HTTP app's 4xx/5xx as the reference runtime does: code by its table, ErrorInfo, dapr-http-status", async () => {
    const errorInfo = type('ErrorInfo');
    const status = type('Status');
    const cases: [number, grpc.status][] = [
      [400, grpc.status.INTERNAL],
      [401, grpc.status.UNAUTHENTICATED],
      [403, grpc.status.PERMISSION_DENIED],
      [404, grpc.status.NOT_FOUND],
      [408, grpc.status.CANCELLED],
      [409, grpc.status.ALREADY_EXISTS],
      [418, grpc.status.UNKNOWN],
      [429, grpc.status.RESOURCE_EXHAUSTED],
      [500, grpc.status.UNKNOWN],
      [501, grpc.status.UNIMPLEMENTED],
      [503, grpc.status.UNAVAILABLE],
      [504, grpc.status.DEADLINE_EXCEEDED],
    ];
    for (const [where, from] of callers()) {
      const ok = await invokeService(from, 'web', 'status/200', '');
      expect(ok.err, where).toBeNull();
      expect(ok.res?.data?.value.toString(), where).toBe('web answered 200');
      expect(ok.headers?.get('dapr-http-status'), where).toEqual(['200']);
      // the app's own answer headers come back as metadata; hop-by-hop ones do not
      expect(ok.headers?.get('x-answer-header'), where).toEqual(['answered 200']);
      expect(ok.headers?.get('connection'), where).toEqual([]);
      for (const [http, code] of cases) {
        const what = `${http} via ${where}`;
        const { err, headers } = await invokeService(from, 'web', `status/${http}`, '');
        const body = http === 500 ? `${'x'.repeat(100)} and more` : `web answered ${http}`;
        expect(err?.code, what).toBe(code);
        expect(err?.details, what).toBe(`web answered HTTP ${http}: ${body}`);
        expect(headers?.get('dapr-http-status') ?? err?.metadata.get('dapr-http-status'), what).toEqual([String(http)]);
        const st = status.toObject(status.decode(err!.metadata.get('grpc-status-details-bin')[0] as Buffer)) as { code: number; message: string; details: { type_url: string; value: Uint8Array }[] };
        expect(st, what).toMatchObject({ code, message: err?.details });
        expect(st.details[0].type_url, what).toBe('type.googleapis.com/google.rpc.ErrorInfo');
        expect(errorInfo.toObject(errorInfo.decode(st.details[0].value)), what).toEqual({
          reason: STATUS_CODES[http],
          domain: 'dapr.io',
          metadata: { 'http.code': String(http), 'http.error_message': body.slice(0, 63) },
        });
      }
    }
  });
});
