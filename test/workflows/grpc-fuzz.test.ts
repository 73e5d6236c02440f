/**
 * fast-check against the gRPC service: a raw client plays the worker and answers runs with
 * arbitrary actions (odd ids, timers in the past, children, events to unknown instances,
 * any completion status, carry-over events); other calls get arbitrary ids and names.
 * The engine must answer every call with OK or a precise status (never INTERNAL/UNKNOWN),
 * keep every instance in a valid state, and still terminate and purge it afterwards.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_PATH, STATUS_BY_NUMBER, type OrchestratorAction, type WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { sidecarForTest, waitUntil, type TestSidecar } from '../../e2e/workflows/harness.ts';

type Call = (req: unknown, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void;
type Raw = Record<string, Call> & { GetWorkItems(req: unknown): grpc.ClientReadableStream<WorkItem> };

let sc: TestSidecar;
let raw: Raw;
let stream: grpc.ClientReadableStream<WorkItem>;
/** The scripted answers for the instance under test; other instances complete at once. */
let script: { id: string; answers: OrchestratorAction[][] } | undefined;
const runsSeen = new Map<string, number>();

const call = <T = Record<string, unknown>>(name: string, req: unknown) =>
  new Promise<{ err: grpc.ServiceError | null; res?: T }>((resolve) => raw[name](req, (err, res) => resolve({ err, res: res as T })));

function answerRun(id: string): OrchestratorAction[] {
  const n = runsSeen.get(id) ?? 0;
  runsSeen.set(id, n + 1);
  if (script && script.id === id) return script.answers[n] ?? [];
  return [{ id: 1, completeOrchestration: { orchestrationStatus: 1, result: { value: '"child done"' } } }];
}

beforeAll(async () => {
  sc = await sidecarForTest('wf-grpc-fuzz');
  const def = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
  const Svc = (grpc.loadPackageDefinition(def) as unknown as Record<string, grpc.ServiceClientConstructor>).TaskHubSidecarService;
  raw = new Svc(sc.grpcAddress, grpc.credentials.createInsecure()) as unknown as Raw;
  stream = raw.GetWorkItems({});
  stream.on('error', () => undefined);
  stream.on('data', (wi: WorkItem) => {
    if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
      const id = wi.orchestratorRequest.instanceId;
      void call('CompleteOrchestratorTask', { instanceId: id, actions: answerRun(id), customStatus: { value: 'fz' } });
    } else if ('activityRequest' in wi && wi.activityRequest) {
      const a = wi.activityRequest;
      const fail = a.taskId % 2 === 0;
      void call('CompleteActivityTask', {
        instanceId: a.orchestrationInstance.instanceId,
        taskId: a.taskId,
        ...(fail ? { failureDetails: { errorType: 'E', errorMessage: 'boom' } } : { result: { value: '1' } }),
      });
    }
  });
  await waitUntil(async () => (await fetch(`${sc.base}/v1.0/metadata`)).ok);
});

afterAll(async () => {
  stream?.cancel();
  (raw as unknown as grpc.Client)?.close();
  await sc?.stop();
});

const ts = (ms: number) => ({ seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 });
const text = fc.string({ maxLength: 12 });
const actionArb: fc.Arbitrary<OrchestratorAction> = fc.oneof(
  fc.record({ id: fc.integer({ min: -3, max: 40 }), scheduleTask: fc.record({ name: text, input: fc.option(fc.record({ value: text }), { nil: undefined }) }) }),
  fc.record({ id: fc.integer({ min: -3, max: 40 }), createTimer: fc.integer({ min: -2000, max: 300 }).map((d) => ({ fireAt: ts(Date.now() + d) })) }),
  fc.record({ id: fc.integer({ min: -3, max: 40 }), createSubOrchestration: fc.record({ instanceId: fc.oneof(text, fc.constant('')), name: text }) }),
  fc.record({ id: fc.integer({ min: -3, max: 40 }), sendEvent: fc.record({ instance: fc.record({ instanceId: text }), name: text, data: fc.option(fc.record({ value: text }), { nil: undefined }) }) }),
  fc.record({ id: fc.integer({ min: -3, max: 40 }), terminateOrchestration: fc.record({ instanceId: text, recurse: fc.boolean() }) }),
  fc.record({
    id: fc.integer({ min: -3, max: 40 }),
    completeOrchestration: fc.record({
      orchestrationStatus: fc.integer({ min: 0, max: 9 }),
      result: fc.option(fc.record({ value: text }), { nil: undefined }),
      carryoverEvents: fc.array(fc.record({ eventId: fc.integer({ min: -1, max: 5 }), eventRaised: fc.record({ name: text }) }), { maxLength: 3 }),
      failureDetails: fc.option(fc.record({ errorType: text, errorMessage: text }), { nil: undefined }),
    }),
  }),
);

const ACCEPTABLE = new Set([grpc.status.OK, grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.ALREADY_EXISTS, grpc.status.FAILED_PRECONDITION, grpc.status.UNIMPLEMENTED]);

describe('TaskHubSidecarService under arbitrary input', () => {
  it('property: arbitrary orchestrator answers never break an instance', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(actionArb, { maxLength: 5 }), { minLength: 1, maxLength: 4 }), async (answers) => {
        const id = `fz-${n++}`;
        script = { id, answers };
        const started = await call('StartInstance', { instanceId: id, name: 'W', input: { value: '0' } });
        expect(started.err).toBeNull();
        // let the scripted runs play out (timers here fire within 300 ms)
        const finished = async () => {
          const g = await call<{ orchestrationState?: { orchestrationStatus: number } }>('GetInstance', { instanceId: id });
          return ['COMPLETED', 'FAILED', 'TERMINATED', 'CANCELED'].includes(STATUS_BY_NUMBER[g.res?.orchestrationState?.orchestrationStatus ?? 0]);
        };
        await waitUntil(async () => (runsSeen.get(id) ?? 0) >= answers.length || (await finished()), 400, 'runs').catch(() => undefined);
        const got = await call<{ exists: boolean; orchestrationState: { orchestrationStatus: number } }>('GetInstance', { instanceId: id, getInputsAndOutputs: true });
        expect(got.err).toBeNull();
        expect(got.res?.exists).toBe(true);
        expect(STATUS_BY_NUMBER[got.res?.orchestrationState.orchestrationStatus ?? 0]).toBeDefined();
        // whatever happened, it can be ended and purged
        expect((await call('TerminateInstance', { instanceId: id })).err).toBeNull();
        const done = await call<{ orchestrationState: { orchestrationStatus: number } }>('WaitForInstanceCompletion', { instanceId: id });
        expect(['COMPLETED', 'FAILED', 'TERMINATED', 'CANCELED']).toContain(STATUS_BY_NUMBER[done.res?.orchestrationState.orchestrationStatus ?? 0]);
        const purged = await call<{ deletedInstanceCount: number }>('PurgeInstances', { instanceId: id });
        expect(purged.err).toBeNull();
        expect((await call<{ exists: boolean }>('GetInstance', { instanceId: id })).res?.exists ?? false).toBe(false);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it('property: client calls with arbitrary ids and names get OK or a precise status', async () => {
    const ops = ['StartInstance', 'GetInstance', 'RaiseEvent', 'TerminateInstance', 'SuspendInstance', 'ResumeInstance', 'PurgeInstances', 'QueryInstances', 'RewindInstance'];
    ops.push('GetInstanceHistory', 'RestartInstance', 'ListInstanceIds', 'ListInstanceIDs', 'RerunWorkflowFromEvent', 'AbandonTaskOrchestratorWorkItem', 'AbandonTaskActivityWorkItem');
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ops), fc.string({ maxLength: 40 }), fc.string({ maxLength: 20 }), fc.integer({ min: -5, max: 50 }), async (op, instanceId, name, n) => {
        // the same few fields under the names the newer RPCs use
        const req = { instanceId, name, input: { value: name }, sourceInstanceID: instanceId, eventID: Math.max(0, n), completionToken: name, pageSize: Math.max(0, n), continuationToken: name };
        const { err } = await call(op, req);
        expect(ACCEPTABLE.has(err?.code ?? grpc.status.OK), `${op}(${JSON.stringify(instanceId)}) → ${err?.code} ${err?.details}`).toBe(true);
        if (op === 'StartInstance' && !err) await call('TerminateInstance', { instanceId });
      }),
      { numRuns: 200 },
    );
    // the service is still healthy
    expect((await call('Hello', {})).err).toBeNull();
  });
});
