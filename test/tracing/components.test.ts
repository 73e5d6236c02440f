/**
 * CLIENT spans of component calls and job triggers to a gRPC app, as a real Jaeger receives them:
 * a state save and get through the HTTP API each show the API's SERVER span with a CLIENT child
 * per store call (the database client attributes: db.system, db.namespace = the store,
 * db.operation.name); a gRPC SaveState and GetState each show the gRPC SERVER span with the store
 * call's CLIENT span as its child; a store call that fails (an etag mismatch) has an error status; a job
 * delivered through AppCallback.OnJobEvent has its CLIENT span, whose context the app gets in the
 * call's metadata.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import type { JaegerSpan } from '../services/jaeger/query.ts';
import { ok, startTestServer } from '../pluggable/helpers.ts';
import { eventually, startCallbackApp, startTracedSidecar, tracingFolder } from './harness.ts';
import { hex, isError } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `components-${process.pid}-${Date.now().toString(36)}`;


describe.skipIf(!available)('spans of component calls and gRPC job triggers, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  let remove: (() => Promise<void>) | undefined;
  let sidecar: Sidecar | undefined;
  let app: grpc.Server | undefined;
  let plug: grpc.Server | undefined;
  /** The traceparent each Get of the pluggable store brought, by key. */
  const plugGets = new Map<string, string>();
  /** The traceparent each OnJobEvent brought, by job name. */
  const jobs = new Map<string, string>();

  beforeAll(async () => {
    jaeger = await startJaeger();
    ({ dir, remove } = await tracingFolder('rt-components-tracing-', jaeger, [{ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'store' }, spec: { type: 'state.in-memory', version: 'v1' } }]));
    let appPort: number;
    ({ server: app, port: appPort } = await startCallbackApp({
      ListTopicSubscriptions: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { subscriptions: [] }),
      OnJobEvent: (call: grpc.ServerUnaryCall<{ name: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        jobs.set(call.request.name, String(call.metadata.get('traceparent')[0] ?? ''));
        cb(null, {});
      },
    }));
    // a pluggable state store in this process: it records the traceparent of each Get, and fails key "bad"
    await mkdir(join(dir, 's'));
    plug = await startTestServer(join(dir, 's', 'plug.sock'), {
      StateStore: {
        Init: ok({}),
        Features: ok({ features: [] }),
        Ping: ok({}),
        Get: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          plugGets.set(call.request.key, String(call.metadata.get('traceparent')[0] ?? ''));
          if (call.request.key.endsWith('bad')) cb({ code: grpc.status.INTERNAL, details: 'the store is broken' });
          else cb(null, { data: Buffer.from('"v"'), etag: { value: '1' }, metadata: {}, content_type: 'application/json' });
        },
      },
    });
    await writeFile(join(dir, 'r', 'plug.yaml'), stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'plug' }, spec: { type: 'state.plug', version: 'v1' } }));
    sidecar = await startTracedSidecar(dir, APP, { port: appPort, protocol: 'grpc' }, { componentsSocketsFolder: join(dir, 's') });
  }, 120_000);

  afterAll(async () => {
    await sidecar?.close();
    app?.forceShutdown();
    plug?.forceShutdown();
    await jaeger?.stop();
    await remove?.();
  });

  /** Calls the API under a new trace; the API's SERVER span and its children as Jaeger has them. */
  async function traced(path: string, init: RequestInit, status: number): Promise<{ server: JaegerSpan; children: JaegerSpan[] }> {
    const traceId = hex(16);
    const root = hex(8);
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}${path}`, { ...init, headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${root}-01` } });
    expect(res.status).toBe(status);
    const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
    const server = spans.find((s) => s.kind === 'server' && s.parentSpanId === root)!;
    expect(server).toBeDefined();
    return { server, children: spans.filter((s) => s.parentSpanId === server.spanId) };
  }

  it('a state save and a get: a CLIENT child of the API span per store call, with the database attributes', async () => {
    const save = await traced('/v1.0/state/store', { method: 'POST', body: JSON.stringify([{ key: 'k1', value: { a: 1 } }]) }, 204);
    expect(save.children).toHaveLength(1);
    expect(save.children[0]).toMatchObject({
      kind: 'client',
      operationName: 'state/store save',
      serviceName: APP,
      tags: expect.objectContaining({ 'db.system': 'in-memory', 'db.namespace': 'store', 'db.operation.name': 'save', 'rt.component': 'store', 'rt.component_type': 'state.in-memory', 'rt.operation': 'state.save', 'rt.app_id': APP }),
    });
    expect(isError(save.children[0])).toBe(false);

    const get = await traced('/v1.0/state/store/k1', { method: 'GET' }, 200);
    expect(get.children).toHaveLength(1);
    expect(get.children[0]).toMatchObject({ kind: 'client', operationName: 'state/store get', tags: expect.objectContaining({ 'db.namespace': 'store', 'db.operation.name': 'get' }) });
  }, 60_000);

  it('a gRPC SaveState and GetState: the store call is a CLIENT child of the gRPC SERVER span', async () => {
    const client = new (runtimeClient())(`127.0.0.1:${sidecar!.grpcPort}`, grpc.credentials.createInsecure());
    try {
      const call = (method: string, req: unknown, traceId: string, root: string) => {
        const md = new grpc.Metadata();
        md.set('traceparent', `00-${traceId}-${root}-01`);
        return new Promise<unknown>((resolve, reject) => (client[method] as (r: unknown, m: grpc.Metadata, cb: (e: Error | null, v?: unknown) => void) => void).call(client, req, md, (e, v) => (e ? reject(e) : resolve(v))));
      };
      for (const [method, req, operation] of [
        ['SaveState', { store_name: 'store', states: [{ key: 'g1', value: Buffer.from('"v"') }] }, 'save'],
        ['GetState', { store_name: 'store', key: 'g1' }, 'get'],
      ] as const) {
        const traceId = hex(16);
        const root = hex(8);
        await call(method, req, traceId, root);
        const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
        const server = spans.find((s) => s.kind === 'server' && s.parentSpanId === root);
        expect(server).toMatchObject({ operationName: `dapr.proto.runtime.v1.Dapr/${method}`, tags: expect.objectContaining({ 'rpc.method': method }) });
        const children = spans.filter((s) => s.parentSpanId === server!.spanId);
        expect(children).toHaveLength(1);
        expect(children[0]).toMatchObject({ kind: 'client', traceId, operationName: `state/store ${operation}`, tags: expect.objectContaining({ 'db.namespace': 'store', 'db.operation.name': operation }) });
      }
    } finally {
      client.close();
    }
  }, 60_000);

  it('a store call that fails (an etag mismatch) has an error status', async () => {
    const failed = await traced('/v1.0/state/store', { method: 'POST', body: JSON.stringify([{ key: 'k1', value: 2, etag: '999999' }]) }, 409);
    expect(failed.children).toHaveLength(1);
    expect(failed.children[0]).toMatchObject({ kind: 'client', operationName: 'state/store save' });
    expect(isError(failed.children[0])).toBe(true);
  }, 60_000);

  it('a pluggable store gets the CLIENT span as traceparent metadata; its error answer marks the span', async () => {
    const good = await traced('/v1.0/state/plug/k-good', { method: 'GET' }, 200);
    expect(good.children).toHaveLength(1);
    expect(good.children[0]).toMatchObject({ kind: 'client', operationName: 'state/plug get', tags: expect.objectContaining({ 'db.system': 'plug', 'db.namespace': 'plug' }) });
    expect(isError(good.children[0])).toBe(false);
    const sent = parseTraceParent([...plugGets].find(([k]) => k.endsWith('k-good'))?.[1]);
    expect(sent).toMatchObject({ traceId: good.server.traceId, spanId: good.children[0].spanId });

    const bad = await traced('/v1.0/state/plug/k-bad', { method: 'GET' }, 500);
    expect(bad.children).toHaveLength(1);
    expect(isError(bad.children[0])).toBe(true);
  }, 60_000);

  it('a job delivered through OnJobEvent: its CLIENT span, whose context the app gets in the metadata', async () => {
    const name = `job-${hex(4)}`;
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0-alpha1/jobs/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '0s', data: { a: 1 } }) });
    expect(res.status).toBeLessThan(300);
    const got = parseTraceParent(await eventually(() => jobs.get(name), 'the OnJobEvent delivery', 20_000));
    expect(got).toBeDefined();
    const spans = await jaeger.waitForTrace(got!.traceId, 1, 20_000);
    expect(spans.find((s) => s.spanId === got!.spanId)).toMatchObject({
      kind: 'client',
      operationName: `job ${name}`,
      tags: expect.objectContaining({ 'rt.operation': 'jobs.trigger', 'rt.job': name, 'rpc.system': 'grpc', 'rpc.method': 'OnJobEvent' }),
    });
  }, 60_000);
});
