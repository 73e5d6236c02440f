/**
 * Spans of the hops beyond the API, as a real Jaeger receives them from a sidecar exporting over
 * OTLP/gRPC:
 * - an output binding call (a pluggable binding served on a Unix socket by this test) is a CLIENT
 *   span under the API request's span, and the component gets that span's context in the
 *   request's metadata;
 * - an input binding's event (the pluggable binding's Read stream) reaches the app with the
 *   traceparent of a CONSUMER span whose parent is the event's own traceparent metadata;
 * - a workflow started over HTTP with one activity (a raw TaskHub worker of this test) shows the
 *   start call, the orchestration and the activity in one trace, and the worker's ActivityRequest
 *   carries the activity span's context as parentTraceContext.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { PROTO_PATH, type ActivityRequest, type WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { eventually, startFlow, workflowStatus } from './harness.ts';
import { componentYaml, ok, startTestServer } from '../pluggable/helpers.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `hops-${process.pid}-${Date.now().toString(36)}`;
/** The context the input binding's event brings in its metadata. */
const EVENT_TRACE = hex(16);
const EVENT_SPAN = hex(8);

type Unary = (req: unknown, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void;
type TaskHub = grpc.Client & Record<string, Unary> & { GetWorkItems(req: unknown): grpc.ClientReadableStream<WorkItem> };

describe.skipIf(!available)('spans of bindings and workflows, exported to Jaeger', () => {
  let jaeger: Jaeger;
  let dir: string;
  let sidecar: Sidecar | undefined;
  let app: Server | undefined;
  const components: grpc.Server[] = [];
  let taskHub: TaskHub | undefined;
  let workItems: grpc.ClientReadableStream<WorkItem> | undefined;
  const prevHome = process.env.RT_HOME;
  /** What the output binding got, by the data it was sent. */
  const invoked = new Map<string, Record<string, string>>();
  /** What the app got from the input binding. */
  let inputHeaders: IncomingHttpHeaders | undefined;
  /** The ActivityRequests the worker got, by instance. */
  const activities = new Map<string, ActivityRequest>();

  beforeAll(async () => {
    jaeger = await startJaeger();
    // short paths: a Unix socket path stays under ~107 bytes
    dir = await mkdtemp(join(tmpdir(), 'rthop-'));
    process.env.RT_HOME = join(dir, 'home');
    for (const d of ['s', 'r']) await mkdir(join(dir, d));
    app = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.method === 'POST' && req.url === '/in') inputHeaders = req.headers;
        res.writeHead(req.method === 'POST' ? 200 : 404, { 'content-type': 'application/json' }).end('{}');
      });
    });
    const appPort = await new Promise<number>((r) => app!.listen(0, '127.0.0.1', () => r((app!.address() as { port: number }).port)));

    components.push(
      await startTestServer(join(dir, 's', 'out.sock'), {
        OutputBinding: {
          Init: ok({}),
          Ping: ok({}),
          ListOperations: ok({ operations: ['create'] }),
          Invoke: (call: grpc.ServerUnaryCall<{ data: Buffer; metadata: Record<string, string> }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
            invoked.set(call.request.data.toString(), { ...call.request.metadata });
            cb(null, { data: Buffer.from('done'), metadata: {} });
          },
        },
      }),
      await startTestServer(join(dir, 's', 'in.sock'), {
        InputBinding: {
          Init: ok({}),
          Ping: ok({}),
          Read: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
            call.on('data', () => undefined);
            call.write({ data: Buffer.from('{"n":1}'), metadata: { traceparent: `00-${EVENT_TRACE}-${EVENT_SPAN}-01` }, contentType: 'application/json', messageId: 'm1' });
          },
        },
      }),
    );
    await writeFile(join(dir, 'r', 'components.yaml'), [componentYaml({ name: 'out', type: 'bindings.out' }), componentYaml({ name: 'in', type: 'bindings.in' })].join('\n---\n'));
    await writeFile(
      join(dir, 'config.yaml'),
      stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing: { samplingRate: '1', otel: { endpointAddress: jaeger.otlpGrpcEndpoint, isSecure: false, protocol: 'grpc' } } } }),
    );
    sidecar = await startSidecar({
      appId: APP,
      appPort,
      httpPort: 0,
      grpcPort: 0,
      enableMetrics: false,
      dataDir: join(dir, 'd'),
      componentsSocketsFolder: join(dir, 's'),
      resourcesPaths: [join(dir, 'r')],
      configFile: join(dir, 'config.yaml'),
      logger: pino({ level: 'silent' }),
    });

    // a worker speaking TaskHubSidecarService: the workflow schedules one activity, then completes
    const def = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
    const Svc = (grpc.loadPackageDefinition(def) as unknown as Record<string, grpc.ServiceClientConstructor>).TaskHubSidecarService;
    const hub = new Svc(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure()) as unknown as TaskHub;
    taskHub = hub;
    const call = (name: string, req: unknown) => hub[name](req, () => undefined);
    workItems = hub.GetWorkItems({});
    workItems.on('error', () => undefined);
    workItems.on('data', (wi: WorkItem) => {
      if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
        const req = wi.orchestratorRequest;
        const answered = [...(req.pastEvents ?? []), ...(req.newEvents ?? [])].some((e) => e.taskCompleted);
        const actions = answered ? [{ id: 1, completeOrchestration: { orchestrationStatus: 1, result: { value: '"ok"' } } }] : [{ id: 0, scheduleTask: { name: 'act', input: { value: '1' } } }];
        call('CompleteOrchestratorTask', { instanceId: req.instanceId, actions });
      } else if ('activityRequest' in wi && wi.activityRequest) {
        const a = wi.activityRequest;
        activities.set(a.orchestrationInstance.instanceId, a);
        call('CompleteActivityTask', { instanceId: a.orchestrationInstance.instanceId, taskId: a.taskId, result: { value: '2' } });
      }
    });
  }, 120_000);

  afterAll(async () => {
    workItems?.cancel();
    taskHub?.close();
    await sidecar?.close();
    for (const c of components) c.forceShutdown();
    app?.close();
    await jaeger?.stop();
    if (prevHome === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prevHome;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("an output binding call is a CLIENT span under the API's, and the binding gets its context in the metadata", async () => {
    const traceId = hex(16);
    const root = hex(8);
    const data = `d-${hex(4)}`;
    const res = await fetch(`http://127.0.0.1:${sidecar!.httpPort}/v1.0/bindings/out`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${root}-01`, tracestate: 'rt=hop' },
      body: JSON.stringify({ operation: 'create', data, metadata: { own: 'kept' } }),
    });
    expect(res.status).toBe(200);
    const md = await eventually(() => invoked.get(data), 'the binding call');
    expect(md.own).toBe('kept');
    expect(md.tracestate).toBe('rt=hop');
    const sent = parseTraceParent(md.traceparent);
    expect(sent?.traceId).toBe(traceId);

    const spans = await jaeger.waitForTrace(traceId, 2, 20_000);
    const api = spans.find((s) => s.kind === 'server');
    expect(api).toMatchObject({ serviceName: APP, parentSpanId: root, tags: expect.objectContaining({ 'http.route': '/v1.0/bindings/:name' }) });
    expect(spans.find((s) => s.spanId === sent!.spanId)).toMatchObject({
      kind: 'client',
      operationName: 'bindings/out create',
      parentSpanId: api!.spanId,
      tags: expect.objectContaining({ 'rt.component': 'out', 'rt.operation': 'bindings.create', 'rt.app_id': APP }),
    });
  }, 60_000);

  it("an input binding's event reaches the app under a CONSUMER span whose parent is the event's context", async () => {
    const headers = await eventually(() => inputHeaders, 'the input binding event');
    const got = parseTraceParent(headers.traceparent);
    expect(got?.traceId).toBe(EVENT_TRACE);
    const spans = await jaeger.waitForTrace(EVENT_TRACE, 1, 20_000);
    expect(spans.find((s) => s.spanId === got!.spanId)).toMatchObject({
      kind: 'consumer',
      operationName: 'bindings/in',
      parentSpanId: EVENT_SPAN,
      tags: expect.objectContaining({ 'rt.component': 'in', 'rt.operation': 'bindings.input', 'http.response.status_code': 200 }),
    });
  }, 60_000);

  it('a workflow with one activity: the start call, the orchestration and the activity are one trace, and the worker gets the activity span as parentTraceContext', async () => {
    const traceId = hex(16);
    const root = hex(8);
    const id = `wf-${hex(4)}`;
    const res = await startFlow(sidecar!, id, `00-${traceId}-${root}-01`);
    expect(res.status).toBe(202);
    const activity = await eventually(() => activities.get(id), 'the activity work item');
    const given = parseTraceParent(activity.parentTraceContext?.traceParent);
    expect(given?.traceId).toBe(traceId);
    expect(await workflowStatus(sidecar!, id, 'COMPLETED')).toBe('COMPLETED');

    // the API span, create_orchestration, the orchestration (ended at completion) and the activity
    const spans = await jaeger.waitForTrace(traceId, 4, 20_000);
    const api = spans.find((s) => s.kind === 'server' && s.parentSpanId === root);
    expect(api?.tags).toMatchObject({ 'http.request.method': 'POST' });
    const create = spans.find((s) => s.operationName === 'create_orchestration flow');
    expect(create).toMatchObject({ kind: 'producer', parentSpanId: api!.spanId, tags: expect.objectContaining({ 'rt.workflow.instance_id': id }) });
    const orchestration = spans.find((s) => s.operationName === 'orchestration flow');
    expect(orchestration).toMatchObject({ kind: 'server', parentSpanId: create!.spanId, tags: expect.objectContaining({ 'rt.workflow.status': 'COMPLETED' }) });
    const act = spans.find((s) => s.spanId === given!.spanId);
    expect(act).toMatchObject({ kind: 'client', operationName: 'activity act', parentSpanId: orchestration!.spanId, tags: expect.objectContaining({ 'rt.workflow.task_id': 0 }) });
  }, 60_000);
});
