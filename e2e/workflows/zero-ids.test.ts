/**
 * Workers that number their actions from 0 (durabletask-go behind the Go SDK, and the Java and
 * .NET SDKs; the JS and Python SDKs start at 1). proto3 does not send a 0 on the wire, so the
 * first action of such a worker arrives without an id, and its activity result without a taskId:
 * both must still be action 0, or the workflow hangs in RUNNING. Driven by a worker speaking
 * TaskHubSidecarService directly, as those SDKs do; protobufjs writes a 0 it is given, so the
 * worker here leaves zeros out as Go's encoder does.
 */
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATUS_BY_NUMBER, type HistoryEvent, type OrchestrationStateMsg, type OrchestratorAction, type OrchestratorRequest, type WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { rawTaskHub, sidecarForTest, type RawTaskHub, type TestSidecar } from './harness.ts';

let sc: TestSidecar;
let raw: RawTaskHub;
let stream: grpc.ClientReadableStream<WorkItem>;
/** What the worker answers for a run of a workflow, by name, from the run's whole history. */
const workflows = new Map<string, (history: HistoryEvent[], req: OrchestratorRequest) => OrchestratorAction[]>();
const activityInputs: (string | undefined)[] = [];

const nameOf = (history: HistoryEvent[]) => history.find((e) => e.executionStarted)?.executionStarted?.name ?? '';
/** An action as Go's encoder puts it on the wire: an id of 0 is not sent at all. */
const action = (id: number, body: Omit<OrchestratorAction, 'id'>): OrchestratorAction => (id === 0 ? body : { id, ...body }) as OrchestratorAction;
const complete = (id: number, result: string): OrchestratorAction => action(id, { completeOrchestration: { orchestrationStatus: 1, result: { value: result } } });

beforeAll(async () => {
  sc = await sidecarForTest('wf-zero-ids');
  raw = rawTaskHub(sc.grpcAddress);
  stream = raw.workItems();
  stream.on('error', () => undefined);
  stream.on('data', (wi: WorkItem) => {
    if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
      const req = wi.orchestratorRequest;
      const history = [...(req.pastEvents ?? []), ...(req.newEvents ?? [])];
      const actions = workflows.get(nameOf(history))?.(history, req) ?? [complete(0, '"?"')];
      void raw.call('CompleteOrchestratorTask', { instanceId: req.instanceId, actions });
    } else if ('activityRequest' in wi && wi.activityRequest) {
      const a = wi.activityRequest;
      activityInputs.push(a.input?.value);
      // task 0 is not sent, as Go's encoder does
      void raw.call('CompleteActivityTask', { instanceId: a.orchestrationInstance.instanceId, ...(a.taskId ? { taskId: a.taskId } : {}), result: { value: `"done ${a.input?.value ?? ''}"` } });
    }
  });
});

afterAll(async () => {
  stream?.cancel();
  raw?.close();
  await sc?.stop();
});

async function run(instanceId: string, name: string): Promise<OrchestrationStateMsg> {
  expect((await raw.call('StartInstance', { instanceId, name, input: { value: '1' } })).err).toBeNull();
  const { err, res } = await raw.call<{ orchestrationState: OrchestrationStateMsg }>('WaitForInstanceCompletion', { instanceId, getInputsAndOutputs: true });
  expect(err).toBeNull();
  return res!.orchestrationState;
}

describe('actions numbered from 0', () => {
  it('an activity as action 0 runs and its result completes the workflow', async () => {
    workflows.set('firstActivity', (history) => {
      const done = history.find((e) => e.taskCompleted);
      if (!done) return [action(0, { scheduleTask: { name: 'work', input: { value: '"a"' } } })];
      expect(done.taskCompleted?.taskScheduledId ?? 0).toBe(0);
      return [complete(1, done.taskCompleted?.result?.value ?? 'null')];
    });
    const st = await run('zero-activity', 'firstActivity');
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
    expect(st.output?.value).toBe('"done "a""');
    expect(activityInputs).toContain('"a"');
  });

  it('a child workflow as action 0 without an instance id gets a generated one and completes', async () => {
    workflows.set('child', () => [complete(0, '"from child"')]);
    workflows.set('parentOfChild', (history) => {
      const done = history.find((e) => e.subOrchestrationInstanceCompleted);
      if (!done) return [action(0, { createSubOrchestration: { instanceId: '', name: 'child', input: { value: '2' } } })];
      return [complete(1, done.subOrchestrationInstanceCompleted?.result?.value ?? 'null')];
    });
    const st = await run('zero-child', 'parentOfChild');
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
    expect(st.output?.value).toBe('"from child"');
    const child = await raw.call<{ exists: boolean }>('GetInstance', { instanceId: 'zero-child:0000' });
    expect(child.res?.exists).toBe(true);
  });

  it('a timer as action 0 fires', async () => {
    workflows.set('firstTimer', (history, req) => {
      if (!history.some((e) => e.timerFired)) {
        const now = history.find((e) => e.orchestratorStarted)?.timestamp ?? req.newEvents[0]?.timestamp;
        const at = Number(now?.seconds ?? Math.floor(Date.now() / 1000));
        return [action(0, { createTimer: { fireAt: { seconds: at, nanos: 0 } } })];
      }
      return [complete(1, '"fired"')];
    });
    const st = await run('zero-timer', 'firstTimer');
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
    expect(st.output?.value).toBe('"fired"');
  });
});
