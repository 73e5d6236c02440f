/**
 * Dapr-protocol workflow versioning (patches and version names) and history propagation, driven
 * by workers that speak TaskHubSidecarService directly: the installed JS SDKs have neither, and
 * these are the fields the Dapr Python SDK sends for `ctx.is_patched()`,
 * `register_versioned_workflow` and `PropagationScope`. The patches and the version name a run
 * answers with come back in that run's OrchestratorStarted on every replay, after a sidecar
 * restart too; activities and children get the history asked for; a Microsoft-protocol answer
 * with tags at the Dapr field numbers does no harm.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { protobufjs } from '../../shared/proto-libs.ts';
import {
  PROTO_PATH,
  STATUS_BY_NUMBER,
  type ActivityRequest,
  type HistoryEvent,
  type OrchestrationStateMsg,
  type OrchestrationVersion,
  type OrchestratorAction,
  type OrchestratorRequest,
  type PropagatedHistory,
  type WorkItem,
} from '../../sidecar/src/workflows/proto.ts';
import { rawTaskHub, sidecarForTest, waitUntil, type RawTaskHub, type TestSidecar } from './harness.ts';

const APP = 'wf-versioning';

/** What a scripted worker answers a run with; undefined = no answer (the run stays in flight). */
type RunAnswer = { actions: OrchestratorAction[]; version?: OrchestrationVersion } | undefined;

interface ScriptedWorker {
  raw: RawTaskHub;
  runs: OrchestratorRequest[];
  activities: ActivityRequest[];
  close(): void;
}

/** A worker on `address`: runs go to `onRun`, activities to `onActivity` (undefined = no answer). */
function scriptedWorker(address: string, onRun: (req: OrchestratorRequest) => RunAnswer, onActivity: (req: ActivityRequest) => string | undefined): ScriptedWorker {
  const raw = rawTaskHub(address);
  const w: ScriptedWorker = { raw, runs: [], activities: [], close: () => (stream.cancel(), raw.close()) };
  const stream = raw.workItems();
  stream.on('error', () => undefined);
  stream.on('data', (wi: WorkItem) => {
    if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
      const req = wi.orchestratorRequest;
      w.runs.push(req);
      const answer = onRun(req);
      if (answer) void raw.call('CompleteOrchestratorTask', { instanceId: req.instanceId, ...answer });
    } else if ('activityRequest' in wi && wi.activityRequest) {
      const a = wi.activityRequest;
      w.activities.push(a);
      const result = onActivity(a);
      if (result !== undefined) void raw.call('CompleteActivityTask', { instanceId: a.orchestrationInstance.instanceId, taskId: a.taskId, result: { value: result } });
    }
  });
  return w;
}

const eventsOf = (req: OrchestratorRequest): HistoryEvent[] => [...(req.pastEvents ?? []), ...(req.newEvents ?? [])];
const complete = (result: string): OrchestratorAction => ({ id: 99, completeOrchestration: { orchestrationStatus: 1, result: { value: result } } });
const kindOf = (e: HistoryEvent): string => Object.keys(e).find((k) => k !== 'eventId' && k !== 'timestamp' && k !== 'eventType' && k !== 'router') ?? '';

async function finished(raw: RawTaskHub, id: string): Promise<OrchestrationStateMsg> {
  const { err, res } = await raw.call<{ orchestrationState: OrchestrationStateMsg }>('WaitForInstanceCompletion', { instanceId: id, getInputsAndOutputs: true });
  expect(err).toBeNull();
  return res!.orchestrationState;
}

async function history(raw: RawTaskHub, id: string): Promise<HistoryEvent[]> {
  const { err, res } = await raw.call<{ events?: HistoryEvent[] }>('GetInstanceHistory', { instanceId: id });
  expect(err).toBeNull();
  return res?.events ?? [];
}

async function start(raw: RawTaskHub, instanceId: string, name: string): Promise<void> {
  expect((await raw.call('StartInstance', { instanceId, name })).err).toBeNull();
}

/** The plain fields of a decoded version (proto-loader adds `_name` for the optional field). */
const plain = (v: OrchestrationVersion | null | undefined) => (v ? { patches: v.patches ?? [], name: v.name ?? undefined } : undefined);

/** The events of each chunk of a propagated history, decoded as the receiving SDK does. */
function chunksOf(h: PropagatedHistory | undefined): { appId: string; instanceId: string; workflowName: string; events: HistoryEvent[] }[] {
  const HistoryEvent = protobufjs().loadSync(PROTO_PATH).lookupType('HistoryEvent');
  return (h?.chunks ?? []).map((c) => ({
    appId: c.appId,
    instanceId: c.instanceId,
    workflowName: c.workflowName,
    events: c.rawEvents.map((raw) => HistoryEvent.toObject(HistoryEvent.decode(raw as Uint8Array), { enums: Number, longs: Number, defaults: false }) as HistoryEvent),
  }));
}

describe('patches and version names', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-versioning-restart-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('come back in the OrchestratorStarted of the run that answered with them, on every replay and after a restart', async () => {
    // the SDK's is_patched('p1'): true on a first run; on replay, true only if the history says so.
    // A replay that does not match its history is answered with no actions, as the SDK does.
    const onRun = (req: OrchestratorRequest): RunAnswer => {
      const replaying = (req.pastEvents ?? []).length > 0;
      const patches = eventsOf(req).flatMap((e) => e.orchestratorStarted?.version?.patches ?? []);
      if (replaying && !patches.includes('p1')) return { actions: [] };
      const version = { patches: ['p1', 'p1'], name: 'v2' };
      const result = eventsOf(req).find((e) => e.taskCompleted)?.taskCompleted?.result?.value;
      if (result) return { actions: [complete(`["patched",${result}]`)], version };
      return { actions: [{ id: 0, scheduleTask: { name: 'sq', input: { value: '3' } } }], version };
    };

    // first sidecar: the first run is stored, the activity is never answered
    let sc: TestSidecar | undefined = await sidecarForTest(APP, { dataDir });
    let w = scriptedWorker(sc.grpcAddress, onRun, () => undefined);
    try {
      await start(w.raw, 'patched', 'usesPatches');
      await waitUntil(async () => (await history(w.raw, 'patched')).some((e) => e.taskScheduled), 10_000, 'the first run to be stored');
      expect(w.activities.map((a) => a.name)).toEqual(['sq']);
    } finally {
      w.close();
      await sc.stop();
    }

    // a new sidecar on the same data dir runs the activity again and replays from the store
    sc = await sidecarForTest(APP, { dataDir });
    w = scriptedWorker(sc.grpcAddress, onRun, () => '9');
    try {
      const st = await finished(w.raw, 'patched');
      expect(STATUS_BY_NUMBER[st.orchestrationStatus]).toBe('COMPLETED');
      expect(st.output?.value).toBe('["patched",9]');

      const replay = w.runs.find((r) => r.instanceId === 'patched')!;
      expect(kindOf(replay.pastEvents[0])).toBe('orchestratorStarted');
      expect(plain(replay.pastEvents[0].orchestratorStarted?.version)).toEqual({ patches: ['p1'], name: 'v2' });
      // the run that is not stored yet has a bare OrchestratorStarted
      expect(replay.newEvents[0].orchestratorStarted?.version).toBeFalsy();

      const started = (await history(w.raw, 'patched')).filter((e) => e.orchestratorStarted);
      expect(started.map((e) => plain(e.orchestratorStarted?.version))).toEqual([
        { patches: ['p1'], name: 'v2' },
        { patches: ['p1'], name: 'v2' },
      ]);
    } finally {
      w.close();
      await sc.stop();
    }
  });
});

describe('history propagation and foreign fields', () => {
  let sc: TestSidecar;
  let w: ScriptedWorker;
  const runScripts = new Map<string, (req: OrchestratorRequest) => RunAnswer>();

  beforeAll(async () => {
    sc = await sidecarForTest(APP);
    w = scriptedWorker(
      sc.grpcAddress,
      (req) => (runScripts.get(req.instanceId) ?? (() => ({ actions: [complete('"done"')] })))(req),
      (a) => (a.name === 'plain' ? '42' : '"seen"'),
    );
  });

  afterAll(async () => {
    w?.close();
    await sc?.stop();
  });

  it('an activity asked for OWN_HISTORY gets the workflow history up to its TaskScheduled', async () => {
    runScripts.set('prop-act', (req) => {
      const events = eventsOf(req);
      if (events.some((e) => e.taskCompleted?.taskScheduledId === 1)) return { actions: [complete('"ok"')] };
      if (events.some((e) => e.taskCompleted?.taskScheduledId === 0)) return { actions: [{ id: 1, scheduleTask: { name: 'seer', historyPropagationScope: 1 } }] };
      return { actions: [{ id: 0, scheduleTask: { name: 'plain' } }] };
    });
    await start(w.raw, 'prop-act', 'propParent');
    expect(STATUS_BY_NUMBER[(await finished(w.raw, 'prop-act')).orchestrationStatus]).toBe('COMPLETED');

    const mine = w.activities.filter((a) => a.orchestrationInstance.instanceId === 'prop-act');
    expect(mine.find((a) => a.name === 'plain')?.propagatedHistory).toBeFalsy();
    const seer = mine.find((a) => a.name === 'seer')!;
    expect(seer.propagatedHistory?.scope).toBe(1);
    const chunks = chunksOf(seer.propagatedHistory);
    expect(chunks.map(({ appId, instanceId, workflowName }) => ({ appId, instanceId, workflowName }))).toEqual([{ appId: APP, instanceId: 'prop-act', workflowName: 'propParent' }]);
    expect(chunks[0].events.map(kindOf)).toEqual(['orchestratorStarted', 'executionStarted', 'taskScheduled', 'orchestratorStarted', 'taskCompleted', 'taskScheduled']);
    expect(chunks[0].events[4].taskCompleted?.result?.value).toBe('42');
    expect(chunks[0].events[5].taskScheduled).toMatchObject({ name: 'seer', historyPropagationScope: 1 });
  });

  it('a child gets LINEAGE on every run, its next execution after continue-as-new too; a grandchild gets OWN_HISTORY', async () => {
    runScripts.set('prop-root', (req) =>
      eventsOf(req).some((e) => e.subOrchestrationInstanceCompleted)
        ? { actions: [complete('"root done"')] }
        : { actions: [{ id: 0, createSubOrchestration: { instanceId: 'prop-kid', name: 'kid', historyPropagationScope: 2 } }] },
    );
    runScripts.set('prop-kid', (req) => {
      const input = eventsOf(req).find((e) => e.executionStarted)?.executionStarted?.input?.value;
      if (input !== '"second"') return { actions: [{ id: 0, completeOrchestration: { orchestrationStatus: 2, result: { value: '"second"' } } }] };
      if (eventsOf(req).some((e) => e.subOrchestrationInstanceCompleted)) return { actions: [complete('"kid done"')] };
      return { actions: [{ id: 0, createSubOrchestration: { instanceId: 'prop-grandkid', name: 'grandkid', historyPropagationScope: 1 } }] };
    });
    await start(w.raw, 'prop-root', 'root');
    expect((await finished(w.raw, 'prop-root')).output?.value).toBe('"root done"');

    expect(w.runs.filter((r) => r.instanceId === 'prop-root').every((r) => !r.propagatedHistory)).toBe(true);
    const kidRuns = w.runs.filter((r) => r.instanceId === 'prop-kid');
    const first = kidRuns.filter((r) => eventsOf(r).find((e) => e.executionStarted)?.executionStarted?.input?.value !== '"second"');
    const second = kidRuns.filter((r) => !first.includes(r));
    expect(first.length).toBeGreaterThan(0);
    expect(second.length).toBeGreaterThan(1);
    for (const r of first) {
      expect(r.propagatedHistory?.scope).toBe(2);
      const chunks = chunksOf(r.propagatedHistory);
      expect(chunks.map((c) => c.workflowName)).toEqual(['root']);
      expect(chunks[0].events.map(kindOf)).toEqual(['orchestratorStarted', 'executionStarted', 'subOrchestrationInstanceCreated']);
      expect(chunks[0].events[2].subOrchestrationInstanceCreated).toMatchObject({ instanceId: 'prop-kid', historyPropagationScope: 2 });
    }
    for (const r of second) {
      expect(r.propagatedHistory?.scope).toBe(2);
      const chunks = chunksOf(r.propagatedHistory);
      expect(chunks.map((c) => `${c.instanceId}/${c.workflowName}`)).toEqual(['prop-root/root', 'prop-kid/kid']);
      // the previous execution's history, ended by the run that continued as new
      expect(chunks[1].events.map(kindOf)).toEqual(['orchestratorStarted', 'executionStarted']);
    }

    const grandkid = w.runs.filter((r) => r.instanceId === 'prop-grandkid');
    expect(grandkid.length).toBeGreaterThan(0);
    const chunks = chunksOf(grandkid[0].propagatedHistory);
    expect(grandkid[0].propagatedHistory?.scope).toBe(1);
    expect(chunks.map((c) => `${c.instanceId}/${c.workflowName}`)).toEqual(['prop-kid/kid']);
    expect(chunks[0].events.map(kindOf)).toEqual(['orchestratorStarted', 'executionStarted', 'subOrchestrationInstanceCreated']);
    expect(chunks[0].events[1].executionStarted?.input?.value).toBe('"second"');
  });

  it('a version that names nothing is not stored', async () => {
    runScripts.set('no-version', () => ({ actions: [complete('"plain"')], version: { patches: [] } }));
    await start(w.raw, 'no-version', 'plainOne');
    await finished(w.raw, 'no-version');
    const started = (await history(w.raw, 'no-version')).filter((e) => e.orchestratorStarted);
    expect(started).toHaveLength(1);
    expect(started[0].orchestratorStarted?.version).toBeFalsy();
  });

  it("a Microsoft-protocol answer (sub-orchestration tags, a trace context at the version's number) does no harm", async () => {
    // the Microsoft proto's numbers for these messages, with the wrappers written out
    const ms = protobufjs().parse(`syntax = "proto3";
      message SV { string value = 1; }
      message TS { int64 seconds = 1; int32 nanos = 2; }
      message OrchestrationTraceContext { SV spanID = 1; TS spanStartTime = 2; }
      message CreateSubOrchestrationAction { string instanceId = 1; string name = 2; SV version = 3; SV input = 4; map<string, string> tags = 6; }
      message OrchestratorAction { int32 id = 1; oneof t { CreateSubOrchestrationAction createSubOrchestration = 3; } }
      message OrchestratorResponse { string instanceId = 1; repeated OrchestratorAction actions = 2; OrchestrationTraceContext orchestrationTraceContext = 6; }`).root;
    const Response = ms.lookupType('OrchestratorResponse');
    const bytes = Buffer.from(
      Response.encode(
        Response.fromObject({
          instanceId: 'ms-parent',
          actions: [{ id: 0, createSubOrchestration: { instanceId: 'ms-kid', name: 'kid', input: { value: '"in"' }, tags: { env: 'prod', city: 'Zürich', café: 'crème brûlée' } } }],
          orchestrationTraceContext: { spanID: { value: '00f067aa0ba902b7' }, spanStartTime: { seconds: 1_700_000_000, nanos: 5 } },
        }),
      ).finish(),
    );
    const client = new grpc.Client(sc.grpcAddress, grpc.credentials.createInsecure());
    try {
      runScripts.set('ms-parent', (req) => {
        if (eventsOf(req).some((e) => e.subOrchestrationInstanceCompleted)) return { actions: [complete('"parent done"')] };
        client.makeUnaryRequest('/TaskHubSidecarService/CompleteOrchestratorTask', (b: Buffer) => b, (b: Buffer) => b, bytes, () => undefined);
        return undefined;
      });
      await start(w.raw, 'ms-parent', 'msParent');
      expect((await finished(w.raw, 'ms-parent')).output?.value).toBe('"parent done"');
    } finally {
      client.close();
    }
    const kidRun = w.runs.find((r) => r.instanceId === 'ms-kid')!;
    expect(eventsOf(kidRun).find((e) => e.executionStarted)?.executionStarted).toMatchObject({ name: 'kid', input: { value: '"in"' } });
    expect(kidRun.propagatedHistory).toBeFalsy();
    const events = await history(w.raw, 'ms-parent');
    expect(events.find((e) => e.subOrchestrationInstanceCreated)?.subOrchestrationInstanceCreated).toMatchObject({ instanceId: 'ms-kid', name: 'kid' });
    expect(events.find((e) => e.subOrchestrationInstanceCreated)?.subOrchestrationInstanceCreated?.historyPropagationScope).toBeFalsy();
    expect(events.filter((e) => e.orchestratorStarted).every((e) => !e.orchestratorStarted?.version)).toBe(true);
  });
});
