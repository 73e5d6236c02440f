/**
 * The request span's context in the answer, as the reference runtime gives it, on real in-process
 * sidecars: with tracing on, HTTP answers (routed, invocation, errors) carry `traceparent` (and
 * the caller's `tracestate`) of the sidecar's span, unless the app's answer brings its own; gRPC
 * answers carry `grpc-trace-bin` and `traceparent` in their header metadata (errors too), except
 * InvokeService's. With tracing off (no Configuration, or samplingRate "0") nothing is added.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { invokeServiceDefinition } from '../../sidecar/src/invoke/grpc-service.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { traceContextBinary } from '../../sidecar/src/tracing/answer.ts';
import { formatTraceParent, parseTraceParent, type TraceParent } from '../../sidecar/src/tracing/context.ts';
import { hex } from './ids.ts';

const RUN = `${process.pid}-${Date.now().toString(36)}`;
const ON = `answers-on-${RUN}`;
const OFF = `answers-off-${RUN}`;
const ZERO = `answers-zero-${RUN}`;
const APP_OWN = '00-11111111111111111111111111111111-2222222222222222-01';

let dir: string;
let app: Server;
const sidecars: Record<string, Sidecar> = {};
const clients: grpc.Client[] = [];
const prevHome = process.env.RT_HOME;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-trace-answers-'));
  process.env.RT_HOME = join(dir, 'home');
  // the app: /own answers with a traceparent of its own, anything else with 200 and no trace headers
  app = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, req.url === '/own' ? { traceparent: APP_OWN, 'content-type': 'text/plain' } : { 'content-type': 'text/plain' }).end('ok'));
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const appPort = (app.address() as { port: number }).port;
  await mkdir(join(dir, 'resources'));
  await writeFile(join(dir, 'resources', 'mem.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n');
  const config = (rate: string) => `apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: tracing\nspec:\n  tracing:\n    samplingRate: "${rate}"\n`;
  await writeFile(join(dir, 'on.yaml'), config('1'));
  await writeFile(join(dir, 'zero.yaml'), config('0'));
  const common = { httpPort: 0, grpcPort: 0, appPort, enableMetrics: false, resourcesPaths: [join(dir, 'resources')], logger: pino({ level: 'silent' }) };
  for (const [id, configFile] of [[ON, join(dir, 'on.yaml')], [OFF, undefined], [ZERO, join(dir, 'zero.yaml')]] as const) {
    sidecars[id] = await startSidecar({ ...common, appId: id, dataDir: join(dir, `${id}-data`), ...(configFile ? { configFile } : {}) });
  }
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.allSettled(Object.values(sidecars).map((s) => s.close()));
  await new Promise((r) => app?.close(r));
  if (prevHome === undefined) delete process.env.RT_HOME;
  else process.env.RT_HOME = prevHome;
  if (dir) await rm(dir, { recursive: true, force: true });
});

const http = (id: string, path: string, headers: Record<string, string> = {}, init: RequestInit = {}) => fetch(`http://127.0.0.1:${sidecars[id].httpPort}${path}`, { ...init, headers });

/** The answer's traceparent, checked to be a child context in the caller's trace. */
function childOf(answer: string | null, caller: TraceParent): TraceParent {
  const tp = parseTraceParent(answer);
  expect(tp, `answer traceparent ${answer}`).toBeDefined();
  expect(tp!.traceId).toBe(caller.traceId);
  expect(tp!.spanId).not.toBe(caller.spanId);
  expect(tp!.flags & 1).toBe(caller.flags & 1);
  return tp!;
}

describe('HTTP answers with tracing on', () => {
  it("carry the span's traceparent, in the caller's trace and with its sampling decision, and the caller's tracestate (any valid context)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 16, maxLength: 16 }), fc.uint8Array({ minLength: 8, maxLength: 8 }), fc.constantFrom(0, 1), async (t, s, flags) => {
        fc.pre(t.some((b) => b !== 0) && s.some((b) => b !== 0));
        const caller = { traceId: Buffer.from(t).toString('hex'), spanId: Buffer.from(s).toString('hex'), flags };
        const res = await http(ON, '/v1.0/state/mem/some-key', { traceparent: formatTraceParent(caller), tracestate: 'vendor=abc' });
        expect(res.status).toBe(204);
        childOf(res.headers.get('traceparent'), caller);
        expect(res.headers.get('tracestate')).toBe('vendor=abc');
      }),
      { numRuns: 25 },
    );
  });

  it('start a new trace for a caller without one, and still answer it', async () => {
    const res = await http(ON, '/v1.0/state/mem/some-key');
    expect(res.status).toBe(204);
    expect(parseTraceParent(res.headers.get('traceparent'))).toBeDefined();
    expect(res.headers.get('tracestate')).toBeNull();
  });

  it('carry it on error answers too (an unknown store, a route that does not exist)', async () => {
    const caller = { traceId: hex(16), spanId: hex(8), flags: 1 };
    for (const path of ['/v1.0/state/nope/k', '/v1.0/not-a-route']) {
      const res = await http(ON, path, { traceparent: formatTraceParent(caller) });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      childOf(res.headers.get('traceparent'), caller);
    }
  });

  it("carry it on invocation answers (served ahead of fastify), but the app's own traceparent wins, without our tracestate beside it", async () => {
    const caller = { traceId: hex(16), spanId: hex(8), flags: 1 };
    const plain = await http(ON, `/v1.0/invoke/${ON}/method/echo`, { traceparent: formatTraceParent(caller), tracestate: 'k=v' });
    expect(await plain.text()).toBe('ok');
    childOf(plain.headers.get('traceparent'), caller);
    expect(plain.headers.get('tracestate')).toBe('k=v');
    const own = await http(ON, `/v1.0/invoke/${ON}/method/own`, { traceparent: formatTraceParent(caller), tracestate: 'k=v' });
    expect(await own.text()).toBe('ok');
    expect(own.headers.get('traceparent')).toBe(APP_OWN);
    expect(own.headers.get('tracestate')).toBeNull();
  });
});

describe('HTTP answers with tracing off', () => {
  it('carry no trace headers, whether there is no Configuration or samplingRate is "0"', async () => {
    const traceparent = `00-${hex(16)}-${hex(8)}-01`;
    for (const id of [OFF, ZERO]) {
      for (const path of ['/v1.0/state/mem/k', `/v1.0/invoke/${id}/method/echo`, '/v1.0/state/nope/k']) {
        const res = await http(id, path, { traceparent, tracestate: 'k=v' });
        await res.arrayBuffer();
        expect(res.headers.get('traceparent'), `${id} ${path}`).toBeNull();
        expect(res.headers.get('tracestate')).toBeNull();
      }
    }
  });
});

/** A unary call's header metadata (or the error's, for a trailers-only answer) and its outcome. */
function unary(id: string, method: string, req: unknown, md: Record<string, string>, ctor: grpc.ServiceClientConstructor = runtimeClient()): Promise<{ headers: grpc.Metadata; error?: grpc.ServiceError }> {
  const client = new ctor(`127.0.0.1:${sidecars[id].grpcPort}`, grpc.credentials.createInsecure());
  clients.push(client);
  const meta = new grpc.Metadata();
  for (const [k, v] of Object.entries(md)) meta.set(k, v);
  return new Promise((resolve) => {
    let headers: grpc.Metadata | undefined;
    const call = (client as unknown as Record<string, (r: unknown, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void) => grpc.ClientUnaryCall>)[method].call(client, req, meta, { deadline: Date.now() + 10_000 }, (error) => {
      resolve({ headers: headers ?? error?.metadata ?? new grpc.Metadata(), error: error ?? undefined });
    });
    call.on('metadata', (m) => (headers = m));
  });
}

describe('gRPC answers', () => {
  it('carry grpc-trace-bin (the reference\'s binary context) and traceparent of the span, errors included, with tracing on', async () => {
    const caller = { traceId: hex(16), spanId: hex(8), flags: 1 };
    const ok = await unary(ON, 'GetMetadata', {}, { traceparent: formatTraceParent(caller) });
    expect(ok.error).toBeUndefined();
    const tp = childOf(String(ok.headers.get('traceparent')[0]), caller);
    expect(ok.headers.get('grpc-trace-bin')[0]).toEqual(traceContextBinary(tp));
    const bad = await unary(ON, 'GetState', { store_name: 'nope', key: 'k' }, { traceparent: formatTraceParent(caller) });
    expect(bad.error?.code).toBeDefined();
    const badTp = childOf(String(bad.headers.get('traceparent')[0]), caller);
    expect(bad.headers.get('grpc-trace-bin')[0]).toEqual(traceContextBinary(badTp));
  });

  it('InvokeService answers with the app\'s metadata only, as the reference does', async () => {
    const res = await unary(ON, 'InvokeService', { id: ON, message: { method: 'echo', http_extension: { verb: 1 } } }, { traceparent: `00-${hex(16)}-${hex(8)}-01` }, grpc.makeGenericClientConstructor(invokeServiceDefinition(), 'Dapr'));
    expect(res.error).toBeUndefined();
    expect(res.headers.get('grpc-trace-bin')).toEqual([]);
  });

  it('carry neither with tracing off', async () => {
    for (const id of [OFF, ZERO]) {
      const res = await unary(id, 'GetMetadata', {}, { traceparent: `00-${hex(16)}-${hex(8)}-01` });
      expect(res.error).toBeUndefined();
      expect(res.headers.get('grpc-trace-bin')).toEqual([]);
      expect(res.headers.get('traceparent')).toEqual([]);
    }
  });
});

describe('grpc-trace-bin', () => {
  it('is the OpenCensus binary form: version 0, trace id, span id, options', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), fc.uint8Array({ minLength: 8, maxLength: 8 }), fc.integer({ min: 0, max: 255 }), (t, s, flags) => {
        const b = traceContextBinary({ traceId: Buffer.from(t).toString('hex'), spanId: Buffer.from(s).toString('hex'), flags });
        expect([...b]).toEqual([0, 0, ...t, 1, ...s, 2, flags]);
      }),
    );
  });
});
