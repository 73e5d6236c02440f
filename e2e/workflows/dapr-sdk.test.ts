/**
 * The engine driven by the @dapr/dapr SDK: WorkflowRuntime (worker) and DaprWorkflowClient,
 * with the API token on (the SDK sends it as dapr-api-token metadata).
 */
import { DaprWorkflowClient, WorkflowRuntime, WorkflowRuntimeStatus, type WorkflowActivityContext, type WorkflowContext } from '@dapr/dapr';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_PATH } from '../../sidecar/src/workflows/proto.ts';
import { quietSdkLogs, sidecarForTest, type TestSidecar } from './harness.ts';

const TOKEN = 'wf-test-token-123';
let sc: TestSidecar;
let runtime: WorkflowRuntime;
let client: DaprWorkflowClient;
let restore: () => void;
/** What the SDK printed with console.info (its orchestration executor reports unknown history events there). */
const sdkLines: string[] = [];

const greet = async (_: WorkflowActivityContext, name: string) => `Hi ${name}`;
const chain = async function* (ctx: WorkflowContext, name: string): any {
  const a = yield ctx.callActivity(greet, name);
  const b = yield ctx.callActivity(greet, a);
  return yield ctx.callActivity(greet, b);
};
const waitThenTimer = async function* (ctx: WorkflowContext): any {
  const ev = yield ctx.waitForExternalEvent('go');
  yield ctx.createTimer(1);
  return `${ev.who} went`;
};

beforeAll(async () => {
  restore = quietSdkLogs();
  console.info = (...args: unknown[]) => void sdkLines.push(args.map(String).join(' '));
  sc = await sidecarForTest('wf-dapr', { apiToken: TOKEN });
  const [daprHost, daprPort] = ['127.0.0.1', String(sc.sidecar.grpcPort)];
  runtime = new WorkflowRuntime({ daprHost, daprPort, daprApiToken: TOKEN, logger: { level: 0 } as never });
  runtime.registerWorkflowWithName('chain', chain).registerWorkflowWithName('waitThenTimer', waitThenTimer).registerActivityWithName('greet', greet);
  await runtime.start();
  client = new DaprWorkflowClient({ daprHost, daprPort, daprApiToken: TOKEN });
});

afterAll(async () => {
  await runtime?.stop().catch(() => undefined);
  await client?.stop().catch(() => undefined);
  await sc?.stop();
  restore?.();
});

describe('workflows with the @dapr/dapr WorkflowRuntime', () => {
  it('runs an activity chain', async () => {
    const id = await client.scheduleNewWorkflow('chain', 'ann');
    const st = await client.waitForWorkflowCompletion(id, true, 20);
    expect(st?.runtimeStatus).toBe(WorkflowRuntimeStatus.COMPLETED);
    expect(JSON.parse(st?.serializedOutput ?? '')).toBe('Hi Hi Hi ann');
    // the chain was replayed three times: the history holds only events the SDK knows
    expect(sdkLines.length).toBeGreaterThan(0);
    expect(sdkLines.filter((l) => /Unknown history event type/.test(l))).toEqual([]);
  });

  it('waits for an external event (raised over HTTP) and a timer', async () => {
    const id = await client.scheduleNewWorkflow('waitThenTimer');
    const started = await client.waitForWorkflowStart(id, false, 10);
    expect(started?.runtimeStatus).toBe(WorkflowRuntimeStatus.RUNNING);
    // the HTTP API wants the token as well
    expect((await fetch(`${sc.base}/v1.0/workflows/rt/${id}/raiseEvent/go`, { method: 'POST', body: '{}' })).status).toBe(401);
    const res = await fetch(`${sc.base}/v1.0/workflows/rt/${id}/raiseEvent/go`, { method: 'POST', body: '{"who":"bo"}', headers: { 'rt-api-token': TOKEN } });
    expect(res.status).toBe(202);
    const t0 = Date.now();
    const st = await client.waitForWorkflowCompletion(id, true, 20);
    expect(st?.runtimeStatus).toBe(WorkflowRuntimeStatus.COMPLETED);
    expect(JSON.parse(st?.serializedOutput ?? '')).toBe('bo went');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  });

  it('rejects gRPC calls without the API token', async () => {
    const def = protoLoader.loadSync(PROTO_PATH, { keepCase: true });
    const Svc = (grpc.loadPackageDefinition(def) as unknown as Record<string, grpc.ServiceClientConstructor>).TaskHubSidecarService;
    const raw = new Svc(`127.0.0.1:${sc.sidecar.grpcPort}`, grpc.credentials.createInsecure()) as unknown as Record<string, (req: unknown, cb: (e: grpc.ServiceError | null) => void) => void>;
    const err = await new Promise<grpc.ServiceError | null>((r) => raw.StartInstance({ name: 'chain' }, r));
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    const stream = (raw as unknown as Record<string, (req: unknown) => grpc.ClientReadableStream<unknown>>).GetWorkItems({});
    const streamErr = await new Promise<grpc.ServiceError>((r) => stream.on('error', r));
    expect(streamErr.code).toBe(grpc.status.UNAUTHENTICATED);
    (raw as unknown as grpc.Client).close();
  });
});
