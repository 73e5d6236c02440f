/**
 * Instance management over TaskHubSidecarService, with the real durabletask-js worker and
 * client: terminate and purge follow the request's `recursive` flag (the SDK's own calls send
 * none, so they are not recursive; the flag is set with a raw client), while HTTP stays
 * recursive. Versions travel from the start request into the history and the state; history
 * can be read (unary and streamed) and carries no OrchestratorCompleted markers; a finished
 * instance can be restarted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient, TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import { whenAll } from '@dapr/durabletask-js/task/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HistoryEvent, OrchestrationStateMsg } from '../../sidecar/src/workflows/proto.ts';
import { getInstance, quietSdkLogs, rawTaskHub, sidecarForTest, waitForStatus, waitUntil, type RawTaskHub, type TestSidecar } from './harness.ts';

let sc: TestSidecar;
let worker: TaskHubGrpcWorker;
let client: TaskHubGrpcClient;
let raw: RawTaskHub;
let restore: () => void;
/** What the SDK printed with console.info/log (it reports unknown history events there). */
const sdkLines: string[] = [];
/** Inputs of every `add` activity run, in order. */
const adds: string[] = [];

beforeAll(async () => {
  restore = quietSdkLogs();
  const record = (...args: unknown[]) => void sdkLines.push(args.map(String).join(' '));
  console.info = record;
  console.log = record;
  sc = await sidecarForTest('wf-mgmt');
  worker = new TaskHubGrpcWorker(sc.grpcAddress);
  worker.addNamedActivity('double', async (_ctx: unknown, n: number) => n * 2);
  worker.addNamedActivity('add', async (_ctx: unknown, [x, y]: [number, number]) => {
    adds.push(`${x}+${y}`);
    return x + y;
  });
  // two steps in a row, and a fan-out followed by a last step: what reruns start from
  worker.addNamedOrchestrator('steps', async function* (ctx: any, n: number): any {
    const a: number = yield ctx.callActivity('add', [n, 1]);
    return yield ctx.callActivity('add', [a, 10]);
  });
  worker.addNamedOrchestrator('fan', async function* (ctx: any): any {
    const parts: number[] = yield whenAll([1, 2, 3].map((x) => ctx.callActivity('add', [x, 0])));
    return yield ctx.callActivity('add', [parts.reduce((p, q) => p + q, 0), 100]);
  });
  // a timer, then a step: a rerun from the timer event
  worker.addNamedOrchestrator('napper', async function* (ctx: any, n: number): any {
    yield ctx.createTimer(2);
    return yield ctx.callActivity('add', [n, 1]);
  });
  // a parent whose child waits for an event: both stay RUNNING until told
  worker.addNamedOrchestrator('holder', async function* (ctx: any): any {
    return yield ctx.callSubOrchestrator('waiter', null, `${ctx.instanceId}-kid`);
  });
  worker.addNamedOrchestrator('waiter', async function* (ctx: any): any {
    return yield ctx.waitForExternalEvent('go');
  });
  // a parent whose child finishes at once
  worker.addNamedOrchestrator('quickParent', async function* (ctx: any, n: number): any {
    const kid: number = yield ctx.callSubOrchestrator('quickChild', n, `${ctx.instanceId}-kid`);
    return kid + 1;
  });
  worker.addNamedOrchestrator('quickChild', async function* (ctx: any, n: number): any {
    return yield ctx.callActivity('double', n);
  });
  await worker.start();
  client = new TaskHubGrpcClient(sc.grpcAddress);
  raw = rawTaskHub(sc.grpcAddress);
});

afterAll(async () => {
  raw?.close();
  await client?.stop();
  await worker?.stop();
  await sc?.stop();
  restore?.();
});

async function state(id: string): Promise<OrchestrationStateMsg | undefined> {
  const { err, res } = await raw.call<{ exists: boolean; orchestrationState?: OrchestrationStateMsg }>('GetInstance', { instanceId: id, getInputsAndOutputs: true });
  expect(err).toBeNull();
  return res?.exists ? res.orchestrationState : undefined;
}

async function history(id: string): Promise<HistoryEvent[]> {
  const { err, res } = await raw.call<{ events?: HistoryEvent[] }>('GetInstanceHistory', { instanceId: id });
  expect(err).toBeNull();
  return res?.events ?? [];
}

const kinds = (events: HistoryEvent[]) => events.map((e) => e.eventType);

describe('terminate', () => {
  it('by the SDK (no recursive flag) ends the parent only; its child keeps running', async () => {
    const id = await client.scheduleNewOrchestration('holder', null, 'term-flat');
    await waitForStatus(sc.base, `${id}-kid`, ['RUNNING']);
    await client.terminateOrchestration(id, 'enough');
    expect((await client.waitForOrchestrationCompletion(id, true, 20))?.runtimeStatus).toBe(OrchestrationStatus.TERMINATED);
    // (that nothing reaches the child later is checked on settled state in test/workflows/engine.test.ts)
    expect((await getInstance(sc.base, `${id}-kid`))?.runtimeStatus).toBe('RUNNING');
    const ended = (await history(id)).find((e) => e.executionTerminated);
    expect(ended?.executionTerminated?.recurse ?? false).toBe(false);
    // the child still works and finishes on its own
    await client.raiseOrchestrationEvent(`${id}-kid`, 'go', 'went');
    const kid = await client.waitForOrchestrationCompletion(`${id}-kid`, true, 20);
    expect(kid?.runtimeStatus).toBe(OrchestrationStatus.COMPLETED);
  });

  it('with recursive: true ends the child too', async () => {
    const id = await client.scheduleNewOrchestration('holder', null, 'term-deep');
    await waitForStatus(sc.base, `${id}-kid`, ['RUNNING']);
    expect((await raw.call('TerminateInstance', { instanceId: id, output: { value: '"stop"' }, recursive: true })).err).toBeNull();
    await waitForStatus(sc.base, `${id}-kid`, ['TERMINATED']);
    const st = await state(id);
    expect(st?.orchestrationStatus).toBe(OrchestrationStatus.TERMINATED);
    expect(st?.output?.value).toBe('"stop"');
    expect((await history(id)).find((e) => e.executionTerminated)?.executionTerminated?.recurse).toBe(true);
  });

  it('over HTTP always ends the children (contract)', async () => {
    const id = await client.scheduleNewOrchestration('holder', null, 'term-http');
    await waitForStatus(sc.base, `${id}-kid`, ['RUNNING']);
    expect((await fetch(`${sc.base}/v1.0/workflows/rt/${id}/terminate`, { method: 'POST' })).status).toBe(202);
    await waitForStatus(sc.base, `${id}-kid`, ['TERMINATED']);
  });
});

describe('purge', () => {
  async function finishedFamily(id: string): Promise<void> {
    await client.scheduleNewOrchestration('quickParent', 4, id);
    const st = await client.waitForOrchestrationCompletion(id, true, 20);
    expect(JSON.parse(st?.serializedOutput ?? 'null')).toBe(9);
    expect((await getInstance(sc.base, `${id}-kid`))?.runtimeStatus).toBe('COMPLETED');
  }

  it('by the SDK (no recursive flag) removes the parent only', async () => {
    await finishedFamily('purge-flat');
    expect((await client.purgeOrchestration('purge-flat'))?.deletedInstanceCount).toBe(1);
    expect(await getInstance(sc.base, 'purge-flat')).toBeUndefined();
    expect((await getInstance(sc.base, 'purge-flat-kid'))?.runtimeStatus).toBe('COMPLETED');
  });

  it('with recursive: true removes the children too', async () => {
    await finishedFamily('purge-deep');
    const { err, res } = await raw.call<{ deletedInstanceCount: number }>('PurgeInstances', { instanceId: 'purge-deep', recursive: true });
    expect(err).toBeNull();
    expect(res?.deletedInstanceCount).toBe(2);
    expect(await getInstance(sc.base, 'purge-deep-kid')).toBeUndefined();
  });

  it('over HTTP removes the children too, as the reference runtime does', async () => {
    await finishedFamily('purge-http');
    expect((await fetch(`${sc.base}/v1.0/workflows/rt/purge-http/purge`, { method: 'POST' })).status).toBe(202);
    expect(await getInstance(sc.base, 'purge-http')).toBeUndefined();
    expect(await getInstance(sc.base, 'purge-http-kid')).toBeUndefined();
  });
});

describe('versions, history and restart', () => {
  it('keeps the version of the start request in the history and the state', async () => {
    const { err } = await raw.call('StartInstance', { instanceId: 'versioned', name: 'quickChild', version: { value: '2.1' }, input: { value: '5' } });
    expect(err).toBeNull();
    expect((await client.waitForOrchestrationCompletion('versioned', true, 20))?.serializedOutput).toBe('10');
    expect((await state('versioned'))?.version?.value).toBe('2.1');
    const started = (await history('versioned')).find((e) => e.executionStarted);
    expect(started?.executionStarted?.version?.value).toBe('2.1');
    // no version asked for: none reported
    const id = await client.scheduleNewOrchestration('quickChild', 1);
    await client.waitForOrchestrationCompletion(id, true, 20);
    expect((await state(id))?.version).toBeUndefined();
  });

  it('returns the history in order, unary and streamed, without OrchestratorCompleted markers', async () => {
    const id = await client.scheduleNewOrchestration('quickParent', 1, 'hist');
    await client.waitForOrchestrationCompletion(id, true, 20);
    const events = await history(id);
    expect(kinds(events)).toEqual([
      'orchestratorStarted',
      'executionStarted',
      'subOrchestrationInstanceCreated',
      'orchestratorStarted',
      'subOrchestrationInstanceCompleted',
      'executionCompleted',
    ]);
    const streamed: HistoryEvent[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = raw.stream<{ events?: HistoryEvent[] }>('StreamInstanceHistory', { instanceId: id });
      s.on('data', (chunk: { events?: HistoryEvent[] }) => streamed.push(...(chunk.events ?? [])));
      s.on('end', () => resolve());
      s.on('error', reject);
    });
    expect(kinds(streamed)).toEqual(kinds(events));
    // the SDK replayed this history several times (and logged its work) but never met an event it does not know
    expect(sdkLines.length).toBeGreaterThan(0);
    expect(sdkLines.filter((l) => /Unknown history event type/.test(l))).toEqual([]);
  });

  it('answers NOT_FOUND for the history of an unknown instance', async () => {
    const { err } = await raw.call('GetInstanceHistory', { instanceId: 'nobody-here' });
    expect(err?.code).toBe(5);
    for (const instanceId of ['nobody-here', '']) {
      const code = await new Promise<number>((resolve) => {
        const s = raw.stream('StreamInstanceHistory', { instanceId });
        s.on('data', () => undefined);
        s.on('error', (e: { code: number }) => resolve(e.code));
        s.on('end', () => resolve(0));
      });
      expect(code).toBe(instanceId ? 5 : 3);
    }
  });

  it('restarts a finished instance under its id, or under a new id', async () => {
    const id = await client.scheduleNewOrchestration('quickChild', 3, 'again');
    await client.waitForOrchestrationCompletion(id, true, 20);
    const same = await raw.call<{ instanceId: string }>('RestartInstance', { instanceId: id });
    expect(same.err).toBeNull();
    expect(same.res?.instanceId).toBe(id);
    expect((await client.waitForOrchestrationCompletion(id, true, 20))?.serializedOutput).toBe('6');
    const fresh = await raw.call<{ instanceId: string }>('RestartInstance', { instanceId: id, restartWithNewInstanceId: true });
    expect(fresh.err).toBeNull();
    expect(fresh.res?.instanceId).not.toBe(id);
    expect((await client.waitForOrchestrationCompletion(fresh.res!.instanceId, true, 20))?.serializedOutput).toBe('6');
    // a running instance is not restarted under its own id
    await client.scheduleNewOrchestration('waiter', null, 'busy');
    await waitForStatus(sc.base, 'busy', ['RUNNING']);
    expect((await raw.call('RestartInstance', { instanceId: 'busy' })).err?.code).toBe(9);
    expect((await raw.call('RestartInstance', { instanceId: 'never-was' })).err?.code).toBe(5);
    await client.terminateOrchestration('busy');
  });
});

describe('rerun from an activity or timer event', () => {
  /** The ids of the TaskScheduled events of an instance, in order. */
  async function scheduled(id: string): Promise<number[]> {
    return (await history(id)).filter((e) => e.taskScheduled).map((e) => e.eventId);
  }

  const rerun = (req: Record<string, unknown>) => raw.call<{ newInstanceID: string }>('RerunWorkflowFromEvent', req);

  it('replays up to the activity, runs it again (with a new input) and keeps what came before', async () => {
    const id = await client.scheduleNewOrchestration('steps', 1, 'rerun-src');
    expect((await client.waitForOrchestrationCompletion(id, true, 20))?.serializedOutput).toBe('12');
    const [, second] = await scheduled(id);
    adds.length = 0;
    const { err, res } = await rerun({ sourceInstanceID: id, eventID: second, newInstanceID: 'rerun-new', input: { value: '[100,10]' }, overwriteInput: true });
    expect(err).toBeNull();
    expect(res?.newInstanceID).toBe('rerun-new');
    expect((await client.waitForOrchestrationCompletion('rerun-new', true, 20))?.serializedOutput).toBe('110');
    // the first step is not run again: its result comes from the copied history
    expect(adds).toEqual(['100+10']);
    // the source is untouched
    expect((await state(id))?.output?.value).toBe('12');

    // without a new input the activity gets what the workflow gives it; a new id is generated
    adds.length = 0;
    const again = await rerun({ sourceInstanceID: id, eventID: second });
    expect(again.err).toBeNull();
    expect(again.res?.newInstanceID).not.toBe(id);
    expect((await client.waitForOrchestrationCompletion(again.res!.newInstanceID, true, 20))?.serializedOutput).toBe('12');
    expect(adds).toEqual(['2+10']);
  });

  it('from inside a fan-out: activities scheduled before it and unanswered at the cut run again', async () => {
    const id = await client.scheduleNewOrchestration('fan', null, 'rerun-fan');
    expect((await client.waitForOrchestrationCompletion(id, true, 20))?.serializedOutput).toBe('106');
    const ids = await scheduled(id);
    adds.length = 0;
    const { err, res } = await rerun({ sourceInstanceID: id, eventID: ids[1] });
    expect(err).toBeNull();
    expect((await client.waitForOrchestrationCompletion(res!.newInstanceID, true, 20))?.serializedOutput).toBe('106');
    expect([...adds].sort()).toEqual(['1+0', '2+0', '3+0', '6+100']);
  });

  it('from a timer event: the timer is created again and fires at once, what follows runs again', async () => {
    const id = await client.scheduleNewOrchestration('napper', 5, 'rerun-nap');
    expect((await client.waitForOrchestrationCompletion(id, true, 20))?.serializedOutput).toBe('6');
    const timer = (await history(id)).find((e) => e.timerCreated)!;
    adds.length = 0;
    const t0 = Date.now();
    const { err, res } = await rerun({ sourceInstanceID: id, eventID: timer.eventId, newInstanceID: 'rerun-nap-2' });
    expect(err).toBeNull();
    expect((await client.waitForOrchestrationCompletion(res!.newInstanceID, true, 20))?.serializedOutput).toBe('6');
    expect(Date.now() - t0).toBeLessThan(10_000); // not the source's 2 s again and again: its time has passed
    expect(adds).toEqual(['5+1']);
  });

  it('refuses what it cannot do, with the right status', async () => {
    const id = await client.scheduleNewOrchestration('steps', 1, 'rerun-bad');
    await client.waitForOrchestrationCompletion(id, true, 20);
    const [first] = await scheduled(id);
    expect((await rerun({ sourceInstanceID: 'rerun-nobody', eventID: 0 })).err?.code).toBe(5);
    expect((await rerun({ eventID: first })).err?.code).toBe(3);
    // an event that is not there, or not an activity's or a timer's: NOT_FOUND, as the reference
    const missing = await rerun({ sourceInstanceID: id, eventID: 999 });
    expect(missing.err?.code).toBe(5);
    expect(missing.err?.details).toMatch(/no event 999/);
    // a child workflow's event (the reference refuses those the same way)
    const parent = await client.scheduleNewOrchestration('quickParent', 1, 'rerun-parent');
    await client.waitForOrchestrationCompletion(parent, true, 20);
    const created = (await history(parent)).find((e) => e.subOrchestrationInstanceCreated)!;
    const childEvent = await rerun({ sourceInstanceID: parent, eventID: created.eventId });
    expect(childEvent.err?.code).toBe(5);
    expect(childEvent.err?.details).toMatch(/neither an activity .* nor a timer/);
    expect((await rerun({ sourceInstanceID: id, eventID: first, newChildWorkflowInstanceID: 'x' })).err?.code).toBe(3);
    expect((await rerun({ sourceInstanceID: id, eventID: first, newInstanceID: 'bad id!' })).err?.code).toBe(3);
    await client.scheduleNewOrchestration('waiter', null, 'rerun-busy');
    await waitForStatus(sc.base, 'rerun-busy', ['RUNNING']);
    // not finished: INVALID_ARGUMENT, as the reference ("not in a terminal state")
    const busy = await rerun({ sourceInstanceID: 'rerun-busy', eventID: 0 });
    expect(busy.err?.code).toBe(3);
    expect(busy.err?.details).toMatch(/not in a terminal state/);
    expect((await rerun({ sourceInstanceID: id, eventID: first, newInstanceID: 'rerun-busy' })).err?.code).toBe(6);
    await client.terminateOrchestration('rerun-busy');
  });
});

describe('listing and querying', () => {
  const ids = ['ls-a', 'ls-b', 'ls-c', 'ls-d'];
  let t0 = 0;

  beforeAll(async () => {
    await client.scheduleNewOrchestration('waiter', null, 'ls-running');
    await waitForStatus(sc.base, 'ls-running', ['RUNNING']);
    t0 = Date.now();
    // the instances below are created after t0, on a later millisecond
    await waitUntil(() => Date.now() > t0, 1000, 'the clock to pass t0');
    for (const [i, id] of ids.entries()) await client.scheduleNewOrchestration('quickChild', i + 1, id);
    for (const id of ids) await client.waitForOrchestrationCompletion(id, true, 20);
  });

  type IdsPage = { instanceIds?: string[]; continuationToken?: string };

  it('ListInstanceIDs (Dapr) pages through every instance once, in id order', async () => {
    const all = await raw.call<IdsPage>('ListInstanceIDs', {});
    expect(all.err).toBeNull();
    const every = all.res?.instanceIds ?? [];
    expect(every).toEqual([...every].sort());
    expect(every).toEqual(expect.arrayContaining([...ids, 'ls-running', 'hist', 'versioned']));
    expect(all.res?.continuationToken).toBeUndefined();
    const paged: string[] = [];
    let token: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const { err, res } = await raw.call<IdsPage>('ListInstanceIDs', { pageSize: 3, continuationToken: token });
      expect(err).toBeNull();
      expect(res?.instanceIds?.length ?? 0).toBeLessThanOrEqual(3);
      paged.push(...(res?.instanceIds ?? []));
      token = res?.continuationToken;
      if (!token) break;
    }
    expect(paged).toEqual(every);
  });

  it('ListInstanceIds (Microsoft) filters by status and completion time', async () => {
    type Page = { instanceIds?: string[]; lastInstanceKey?: { value: string } };
    const running = await raw.call<Page>('ListInstanceIds', { runtimeStatus: [OrchestrationStatus.RUNNING] });
    expect(running.err).toBeNull();
    expect(running.res?.instanceIds).toContain('ls-running');
    expect(running.res?.instanceIds).not.toContain('ls-a');
    const recent = await raw.call<Page>('ListInstanceIds', { completedTimeFrom: { seconds: Math.floor(t0 / 1000), nanos: (t0 % 1000) * 1e6 } });
    expect(recent.res?.instanceIds?.filter((id) => id.startsWith('ls-'))).toEqual(ids);
    const first = await raw.call<Page>('ListInstanceIds', { completedTimeFrom: { seconds: Math.floor(t0 / 1000), nanos: (t0 % 1000) * 1e6 }, pageSize: 2 });
    expect(first.res?.instanceIds?.length).toBe(2);
    expect(first.res?.lastInstanceKey?.value).toBe(first.res?.instanceIds?.[1]);
    expect((await raw.call('ListInstanceIds', { runtimeStatus: [42] })).err?.code).toBe(3);
  });

  it('QueryInstances filters by id prefix, status and creation time, with payloads on request', async () => {
    type Page = { orchestrationState?: OrchestrationStateMsg[]; continuationToken?: { value: string } };
    const created = { seconds: Math.floor(t0 / 1000), nanos: (t0 % 1000) * 1e6 };
    const q = await raw.call<Page>('QueryInstances', { query: { instanceIdPrefix: { value: 'ls-' }, runtimeStatus: [OrchestrationStatus.COMPLETED], createdTimeFrom: created, fetchInputsAndOutputs: true } });
    expect(q.err).toBeNull();
    expect(q.res?.orchestrationState?.map((s) => [s.instanceId, s.output?.value])).toEqual([
      ['ls-a', '2'],
      ['ls-b', '4'],
      ['ls-c', '6'],
      ['ls-d', '8'],
    ]);
    const page = await raw.call<Page>('QueryInstances', { query: { instanceIdPrefix: { value: 'ls-' }, maxInstanceCount: 2 } });
    expect(page.res?.orchestrationState?.map((s) => s.instanceId)).toEqual(['ls-a', 'ls-b']);
    expect(page.res?.orchestrationState?.[0].output).toBeUndefined();
    const next = await raw.call<Page>('QueryInstances', { query: { instanceIdPrefix: { value: 'ls-' }, maxInstanceCount: 2, continuationToken: page.res?.continuationToken } });
    expect(next.res?.orchestrationState?.map((s) => s.instanceId)).toEqual(['ls-c', 'ls-d']);
  });

  it('purges by filter the finished instances that match, and they leave the listings', async () => {
    const created = { seconds: Math.floor(t0 / 1000), nanos: (t0 % 1000) * 1e6 };
    const { err, res } = await raw.call<{ deletedInstanceCount: number }>('PurgeInstances', { purgeInstanceFilter: { createdTimeFrom: created, runtimeStatus: [OrchestrationStatus.COMPLETED, OrchestrationStatus.RUNNING] } });
    expect(err).toBeNull();
    // the running one is left alone
    expect(res?.deletedInstanceCount).toBe(ids.length);
    for (const id of ids) expect(await getInstance(sc.base, id)).toBeUndefined();
    const left = await raw.call<IdsPage>('ListInstanceIDs', {});
    expect(left.res?.instanceIds?.filter((id) => id.startsWith('ls-'))).toEqual(['ls-running']);
    await client.terminateOrchestration('ls-running');
  });
});

describe('the catalog across a restart', () => {
  it('lists the instances of before the restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-catalog-'));
    try {
      let side = await sidecarForTest('wf-catalog', { dataDir });
      let hub = rawTaskHub(side.grpcAddress);
      for (const id of ['cat-1', 'cat-2']) expect((await hub.call('StartInstance', { instanceId: id, name: 'nobodyRunsThis' })).err).toBeNull();
      hub.close();
      await side.stop();
      side = await sidecarForTest('wf-catalog', { dataDir });
      hub = rawTaskHub(side.grpcAddress);
      expect((await hub.call('StartInstance', { instanceId: 'cat-3', name: 'nobodyRunsThis' })).err).toBeNull();
      const { res } = await hub.call<{ instanceIds?: string[] }>('ListInstanceIDs', {});
      expect(res?.instanceIds).toEqual(['cat-1', 'cat-2', 'cat-3']);
      hub.close();
      await side.stop();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
