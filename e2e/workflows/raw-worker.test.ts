/**
 * Protocol features the installed SDKs cannot produce, driven by a worker that speaks
 * TaskHubSidecarService directly (from the sidecar's proto): actions the engine does not
 * support fail the workflow at once and name the action; a worker without the workflow's version
 * stalls it until another worker connects; a sub-orchestration's version and a
 * continue-as-new's new version reach the history and the state; work items given back with
 * AbandonTask*WorkItem are dispatched again.
 */
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALLED_STATUS, STATUS_BY_NUMBER, type ActivityRequest, type HistoryEvent, type OrchestrationStateMsg, type OrchestratorAction, type OrchestratorRequest, type WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { getInstance, rawTaskHub, sidecarForTest, waitUntil, type RawTaskHub, type TestSidecar } from './harness.ts';

/**
 * What the scripted worker does with a run: answer with actions (and the patches the run saw,
 * sent with the Go SDK's newer CompleteWorkflowTask), or give it back.
 */
type RunScript = (req: OrchestratorRequest, token: string) => OrchestratorAction[] | { actions: OrchestratorAction[]; patches: string[] } | 'abandon';
type ActivityScript = (req: ActivityRequest, token: string) => string | 'abandon';

let sc: TestSidecar;
let raw: RawTaskHub;
let stream: grpc.ClientReadableStream<WorkItem>;
const runScripts = new Map<string, RunScript>();
const activityScripts = new Map<string, ActivityScript>();
/** Every run request seen, by instance. */
const runs = new Map<string, OrchestratorRequest[]>();

const done = (result: string): OrchestratorAction[] => [{ id: 99, completeOrchestration: { orchestrationStatus: 1, result: { value: result } } }];

/** The scripted worker on a GetWorkItems stream (a second one is a second worker). */
function serve(s: grpc.ClientReadableStream<WorkItem>): void {
  s.on('error', () => undefined);
  s.on('data', (wi: WorkItem) => {
    const token = wi.completionToken ?? '';
    if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
      const req = wi.orchestratorRequest;
      runs.set(req.instanceId, [...(runs.get(req.instanceId) ?? []), req]);
      const script = runScripts.get(req.instanceId) ?? (() => done('"ok"'));
      const answer = script(req, token);
      if (answer === 'abandon') void raw.call('AbandonTaskOrchestratorWorkItem', { completionToken: token });
      else if (Array.isArray(answer)) void raw.call('CompleteOrchestratorTask', { instanceId: req.instanceId, actions: answer });
      else void raw.call('CompleteWorkflowTask', { instanceId: req.instanceId, actions: answer.actions, version: { patches: answer.patches } });
    } else if ('activityRequest' in wi && wi.activityRequest) {
      const a = wi.activityRequest;
      const answer = (activityScripts.get(a.orchestrationInstance.instanceId) ?? (() => '1'))(a, token);
      if (answer === 'abandon') void raw.call('AbandonTaskActivityWorkItem', { completionToken: token });
      else void raw.call('CompleteActivityTask', { instanceId: a.orchestrationInstance.instanceId, taskId: a.taskId, result: { value: answer } });
    }
  });
}

beforeAll(async () => {
  sc = await sidecarForTest('wf-raw-worker');
  raw = rawTaskHub(sc.grpcAddress);
  stream = raw.workItems();
  serve(stream);
});

afterAll(async () => {
  stream?.cancel();
  raw?.close();
  await sc?.stop();
});

async function start(instanceId: string, name: string, version?: string): Promise<void> {
  expect((await raw.call('StartInstance', { instanceId, name, version: version === undefined ? undefined : { value: version } })).err).toBeNull();
}

async function finished(id: string): Promise<OrchestrationStateMsg> {
  const { err, res } = await raw.call<{ exists: boolean; orchestrationState: OrchestrationStateMsg }>('WaitForInstanceCompletion', { instanceId: id, getInputsAndOutputs: true });
  expect(err).toBeNull();
  return res!.orchestrationState;
}

async function state(id: string): Promise<OrchestrationStateMsg> {
  return (await raw.call<{ orchestrationState: OrchestrationStateMsg }>('GetInstance', { instanceId: id })).res!.orchestrationState;
}

async function historyOf(id: string): Promise<HistoryEvent[]> {
  return (await raw.call<{ events?: HistoryEvent[] }>('GetInstanceHistory', { instanceId: id })).res?.events ?? [];
}

const startedOf = (req: OrchestratorRequest): HistoryEvent['executionStarted'] => [...(req.pastEvents ?? []), ...(req.newEvents ?? [])].find((e) => e.executionStarted)?.executionStarted;

describe('unsupported orchestrator actions', () => {
  it('an entity call fails the workflow at once, naming the action', async () => {
    runScripts.set('entity-user', () => [{ id: 0, sendEntityMessage: {} }]);
    const t0 = Date.now();
    await start('entity-user', 'usesEntities');
    const st = await finished('entity-user');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('FAILED');
    expect(st.failureDetails?.errorType).toBe('UnsupportedOrchestratorAction');
    expect(st.failureDetails?.errorMessage).toMatch(/entity operation \(sendEntityMessage/);
  });

  it('an action of a type the sidecar does not know fails it too (no silent hang)', async () => {
    // an action with an id only: what a newer SDK's action decodes to here
    runScripts.set('future-action', () => [{ id: 3 }]);
    await start('future-action', 'fromTheFuture');
    const st = await finished('future-action');
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('FAILED');
    expect(st.failureDetails?.errorMessage).toMatch(/unknown to this sidecar.*action id 3/);
  });

  it('an activity or child workflow addressed to another app fails it, naming the app; one addressed to this app runs', async () => {
    runScripts.set('cross-app', () => [{ id: 0, scheduleTask: { name: 'echo' }, router: { sourceAppID: 'wf-raw-worker', targetAppID: 'otherapp' } }]);
    const seen: string[] = [];
    activityScripts.set('cross-app', (a) => (seen.push(a.name), '1'));
    await start('cross-app', 'crossApp');
    const st = await finished('cross-app');
    expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('FAILED');
    expect(st.failureDetails?.errorMessage).toMatch(/the activity "echo" on app "otherapp" \(a cross-app workflow call/);
    expect(seen).toEqual([]);

    runScripts.set('own-app', (req) =>
      (req.newEvents ?? []).some((e) => e.taskCompleted) ? done('"here"') : [{ id: 0, scheduleTask: { name: 'echo' }, router: { sourceAppID: 'wf-raw-worker', targetAppID: 'wf-raw-worker' } }],
    );
    await start('own-app', 'ownApp');
    expect((await finished('own-app')).output?.value).toBe('"here"');
  });

  it('an unsupported action among supported ones fails the run before any of them is carried out', async () => {
    runScripts.set('mixed', () => [{ id: 0, scheduleTask: { name: 'never' } }, { id: 1, createDetachedWorkflow: {} }]);
    const seen: string[] = [];
    activityScripts.set('mixed', (a) => (seen.push(a.name), '1'));
    await start('mixed', 'mixedActions');
    const st = await finished('mixed');
    expect(st.failureDetails?.errorMessage).toMatch(/detached workflow \(createDetachedWorkflow/);
    // nothing was dispatched (on settled state, also in test/workflows/engine.test.ts)
    expect(seen).toEqual([]);
  });
});

describe('a worker without the workflow\'s version (WorkflowVersionNotAvailableAction)', () => {
  it('stalls the instance, keeping its events, until a worker that has the version connects', async () => {
    // the first worker has only version 1 of "rolling"; a second, connected later, has version 2
    let upgraded = false;
    runScripts.set('rolling', (req) => {
      if (!upgraded) return [{ id: 0, workflowVersionNotAvailable: {} }];
      const result = (req.newEvents ?? []).find((e) => e.eventRaised)?.eventRaised?.input?.value;
      return result ? done(result) : [];
    });
    await start('rolling', 'rolling', '2');
    await waitUntil(() => (runs.get('rolling')?.length ?? 0) >= 1, 5000, 'the first run');
    // an event raised while it is stalled is kept for the run that succeeds
    expect((await raw.call('RaiseEvent', { instanceId: 'rolling', name: 'go', input: { value: '"went"' } })).err).toBeNull();
    await waitUntil(() => (runs.get('rolling')?.length ?? 0) >= 2, 5000, 'the run for the event');
    const stalled = await waitUntil(async () => {
      const i = await getInstance(sc.base, 'rolling');
      return i?.properties['rt.workflow.stalled'] ? i : undefined;
    }, 5000, 'the stalled property');
    // HTTP keeps the contract's statuses; gRPC says STALLED, as the reference runtime
    expect(stalled.runtimeStatus).toBe('PENDING'); // no run of it was ever applied
    expect(stalled.properties['rt.workflow.stalled']).toMatch(/^VERSION_NOT_AVAILABLE: no worker that answered has version "2" of workflow "rolling"/);
    expect((await state('rolling')).orchestrationStatus).toBe(STALLED_STATUS);
    // nothing of a stalled run is stored: the history is the start and one ExecutionStalled
    const history = await historyOf('rolling');
    expect(history.some((e) => e.eventRaised || e.orchestratorStarted)).toBe(false);
    expect(history.filter((e) => e.executionStalled).map((e) => e.executionStalled!.reason ?? 0)).toEqual([1]);
    // it waits, it does not spin: on fake time in test/workflows/time.test.ts

    upgraded = true;
    const second = raw.workItems();
    serve(second);
    try {
      const st = await finished('rolling');
      expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
      expect(st.output?.value).toBe('"went"');
      // the run that succeeded saw the event raised while it was stalled
      expect(runs.get('rolling')!.at(-1)!.newEvents?.some((e) => e.eventRaised?.name === 'go')).toBe(true);
      expect((await getInstance(sc.base, 'rolling'))?.properties['rt.workflow.stalled']).toBeUndefined();
      // workers are never shown the marker
      expect(runs.get('rolling')!.some((r) => (r.pastEvents ?? []).some((e) => e.executionStalled))).toBe(false);
    } finally {
      second.cancel();
    }
  });
});

describe('a worker whose patches contradict the history (PATCH_MISMATCH)', () => {
  it('stalls the instance until a worker whose patches begin with the history\'s connects', async () => {
    // run 1 saw patch p1; then the code lost its isPatched('p1'); later p2 is added after it
    let patches: string[] = ['p1'];
    runScripts.set('patchy', (req) => {
      const went = [...(req.pastEvents ?? []), ...(req.newEvents ?? [])].some((e) => e.eventRaised);
      return { actions: went ? done('"patched"') : [], patches };
    });
    await start('patchy', 'patchy');
    await waitUntil(async () => ((await historyOf('patchy')).some((e) => e.orchestratorStarted?.version?.patches?.includes('p1')) ? true : undefined), 5000, 'the first run');
    patches = [];
    expect((await raw.call('RaiseEvent', { instanceId: 'patchy', name: 'go', input: { value: '1' } })).err).toBeNull();
    const stalled = await waitUntil(async () => ((await state('patchy')).orchestrationStatus === STALLED_STATUS ? true : undefined), 5000, 'the stall');
    expect(stalled).toBe(true);
    expect((await getInstance(sc.base, 'patchy'))?.properties['rt.workflow.stalled']).toMatch(/^PATCH_MISMATCH: the worker's patches \[\] do not begin with the patches in the history \[p1\]/);
    const history = await historyOf('patchy');
    expect(history.some((e) => e.eventRaised)).toBe(false);
    expect(history.filter((e) => e.executionStalled).map((e) => e.executionStalled!.reason ?? 0)).toEqual([0]);
    // listings filter by the status gRPC shows
    const listed = async (status: number) =>
      ((await raw.call<{ orchestrationState?: OrchestrationStateMsg[] }>('QueryInstances', { query: { runtimeStatus: [status] } })).res?.orchestrationState ?? []).map((o) => o.instanceId);
    expect(await listed(STALLED_STATUS)).toContain('patchy');
    expect(await listed(0 /* RUNNING */)).not.toContain('patchy');

    patches = ['p1', 'p2'];
    const second = raw.workItems();
    serve(second);
    try {
      const st = await finished('patchy');
      expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
      expect(st.output?.value).toBe('"patched"');
    } finally {
      second.cancel();
    }
  });
});

describe('versions', () => {
  it('a sub-orchestration gets the version of its action; its parent info carries the parent version', async () => {
    runScripts.set('vparent', (req) =>
      (req.newEvents ?? []).some((e) => e.subOrchestrationInstanceCompleted) ? done('"parent done"') : [{ id: 1, createSubOrchestration: { instanceId: 'vkid', name: 'kid', version: { value: '3.0' } } }],
    );
    await start('vparent', 'parent', '1.5');
    expect(STATUS_BY_NUMBER[(await finished('vparent')).orchestrationStatus]).toBe('COMPLETED');
    const kidStarted = startedOf(runs.get('vkid')![0]);
    expect(kidStarted?.version?.value).toBe('3.0');
    expect(kidStarted?.parentInstance?.version?.value).toBe('1.5');
    expect((await finished('vkid')).version?.value).toBe('3.0');
    expect(startedOf(runs.get('vparent')![0])?.version?.value).toBe('1.5');
  });

  it('continue-as-new with a new version starts the next execution with it', async () => {
    runScripts.set('upgrade', (req) =>
      startedOf(req)?.version?.value === '2'
        ? done('"upgraded"')
        : [{ id: 0, completeOrchestration: { orchestrationStatus: 2, result: { value: '"again"' }, newVersion: { value: '2' } } }],
    );
    await start('upgrade', 'upgrading', '1');
    const st = await finished('upgrade');
    expect(st.output?.value).toBe('"upgraded"');
    expect(st.version?.value).toBe('2');
  });
});

describe('abandoned work items', () => {
  it('an orchestrator run given back is dispatched again', async () => {
    let n = 0;
    runScripts.set('abandon-run', () => (n++ === 0 ? 'abandon' : done('"second time"')));
    await start('abandon-run', 'picky');
    const st = await finished('abandon-run');
    expect(st.output?.value).toBe('"second time"');
    expect(runs.get('abandon-run')).toHaveLength(2);
  });

  it('an activity given back is dispatched again', async () => {
    runScripts.set('abandon-act', (req) => {
      const result = (req.newEvents ?? []).find((e) => e.taskCompleted)?.taskCompleted?.result?.value;
      return result ? done(result) : [{ id: 0, scheduleTask: { name: 'work', input: { value: '2' } } }];
    });
    let calls = 0;
    activityScripts.set('abandon-act', () => (calls++ === 0 ? 'abandon' : '"worked"'));
    await start('abandon-act', 'withActivity');
    expect((await finished('abandon-act')).output?.value).toBe('"worked"');
    expect(calls).toBe(2);
  });

  it('wants a token; a token of nothing in flight is accepted and ignored', async () => {
    expect((await raw.call('AbandonTaskOrchestratorWorkItem', {})).err?.code).toBe(3);
    expect((await raw.call('AbandonTaskActivityWorkItem', { completionToken: '' })).err?.code).toBe(3);
    expect((await raw.call('AbandonTaskOrchestratorWorkItem', { completionToken: 'not-a-token' })).err).toBeNull();
  });
});
