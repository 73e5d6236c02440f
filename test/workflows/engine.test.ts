/**
 * The engine without gRPC: a fake worker stream receives work items, the test answers them,
 * and a store whose writes can be slowed down widens the windows where runs could overlap.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { factory as memoryFactory } from '../../sidecar/src/components/state/in-memory/index.ts';
import type { ComponentSpec, StateStore, StateTransactionOperation } from '../../sidecar/src/components/types.ts';
import { Engine } from '../../sidecar/src/workflows/engine.ts';
import { InstanceTable } from '../../sidecar/src/workflows/instances.ts';
import type { HistoryEvent, OrchestratorRequest, WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { Timers } from '../../sidecar/src/workflows/timers.ts';
import { Workers } from '../../sidecar/src/workflows/workers.ts';

const log = pino({ level: 'silent' });
const spec: ComponentSpec = { name: 's', type: 'state.in-memory', version: 'v1', metadata: {}, secretKeys: [], initTimeoutMs: 5000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test' };
const PEER = 'ipv4:127.0.0.1:1';
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

interface Harness {
  engine: Engine;
  items: WorkItem[];
  slow: { ms: number };
  runs(): OrchestratorRequest[];
}

const open: Engine[] = [];
afterEach(() => {
  for (const e of open.splice(0)) e.close();
});

async function harness(existing?: StateStore): Promise<Harness & { store: StateStore }> {
  const store = existing ?? (memoryFactory() as StateStore);
  if (!existing) await store.init(spec, { appId: 'a', namespace: 'default', log });
  const slow = { ms: 0 };
  const transact = (store as { rawTransact?: StateStore['transact'] }).rawTransact ?? store.transact!.bind(store);
  (store as { rawTransact?: StateStore['transact'] }).rawTransact = transact;
  store.transact = async (ops: StateTransactionOperation[]) => {
    if (slow.ms) await tick(slow.ms);
    return transact(ops);
  };
  const table = new InstanceTable({ store, prefix: 'a||wf||', shared: false, replicaId: 'local', log });
  const workers = new Workers(log, 100);
  const engine = new Engine(table, workers, new Timers(undefined, log), log);
  open.push(engine);
  const items: WorkItem[] = [];
  const stream = { getPeer: () => PEER, write: (w: WorkItem) => items.push(structuredClone(w)), end: () => undefined };
  workers.addStream(stream as never);
  return { engine, store, items, slow, runs: () => items.flatMap((w) => ('orchestratorRequest' in w ? [w.orchestratorRequest] : [])) };
}

const completedIds = (events: HistoryEvent[]) => events.flatMap((e) => (e.taskCompleted ? [e.taskCompleted.taskScheduledId] : []));

describe('workflow engine runs', () => {
  it('never starts a run while the previous answer is still being stored', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'w', name: 'W' });
    await tick(5);
    expect(h.runs()).toHaveLength(1);
    // run 1 schedules two activities
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [{ id: 1, scheduleTask: { name: 'a' } }, { id: 2, scheduleTask: { name: 'a' } }] }, PEER);
    await tick(5);
    await h.engine.completeActivity({ instanceId: 'w', taskId: 1, result: { value: '1' } }, PEER);
    await tick(5);
    expect(h.runs()).toHaveLength(2);
    // activity 2's result is being stored (slowly) when the answer of run 2 arrives
    h.slow.ms = 30;
    const result2 = h.engine.completeActivity({ instanceId: 'w', taskId: 2, result: { value: '2' } }, PEER);
    await tick(5);
    const answer = h.engine.completeOrchestrator({ instanceId: 'w', actions: [] }, PEER);
    await Promise.all([result2, answer]);
    await tick(80);
    const runs = h.runs();
    expect(runs).toHaveLength(3);
    // every event is shown as new exactly once, never again to a later run
    const shown = runs.flatMap((r) => completedIds(r.newEvents));
    expect(shown).toEqual([1, 2]);
    for (const r of runs) {
      const past = new Set(completedIds(r.pastEvents));
      for (const id of completedIds(r.newEvents)) expect(past.has(id)).toBe(false);
    }
    expect(completedIds(runs[2].newEvents)).toEqual([2]);
    expect(completedIds(runs[2].pastEvents)).toEqual([1]);
    // run 3 completes the instance
    h.slow.ms = 0;
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [{ id: 3, completeOrchestration: { orchestrationStatus: 1, result: { value: '"done"' } } }] }, PEER);
    expect((await h.engine.get('w'))?.status).toBe('COMPLETED');
  });

  it('ignores a second answer to the same run and answers from another peer', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'x', name: 'W' });
    await tick(5);
    await h.engine.completeOrchestrator({ instanceId: 'x', actions: [{ id: 1, scheduleTask: { name: 'a' } }] }, 'ipv4:10.0.0.1:9');
    expect((await h.engine.get('x'))?.status).toBe('PENDING');
    await h.engine.completeOrchestrator({ instanceId: 'x', actions: [{ id: 1, scheduleTask: { name: 'a' } }] }, PEER);
    await h.engine.completeOrchestrator({ instanceId: 'x', actions: [{ id: 1, scheduleTask: { name: 'b' } }] }, PEER);
    const rec = await h.engine.get('x');
    expect(rec?.status).toBe('RUNNING');
    expect(Object.values(rec?.acts ?? {}).map((a) => a.name)).toEqual(['a']);
  });

  it('keeps events raised while suspended and delivers them after resume', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 's', name: 'W' });
    await tick(5);
    await h.engine.completeOrchestrator({ instanceId: 's', actions: [] }, PEER);
    await h.engine.suspend('s');
    await h.engine.raiseEvent('s', 'go', '1');
    await tick(5);
    expect(h.runs()).toHaveLength(1);
    await h.engine.resume('s');
    await tick(5);
    const last = h.runs().at(-1) as OrchestratorRequest;
    expect(last.newEvents.map((e) => Object.keys(e).find((k) => !['eventId', 'timestamp'].includes(k)))).toEqual([
      'orchestratorStarted',
      'executionSuspended',
      'eventRaised',
      'executionResumed',
    ]);
  });

  it('after a restart, resumes pending runs and activities, and ends children of a terminated parent', async () => {
    const h1 = await harness();
    await h1.engine.start({ instanceId: 'r', name: 'W' });
    await tick(5);
    await h1.engine.completeOrchestrator({ instanceId: 'r', actions: [{ id: 1, scheduleTask: { name: 'act' } }] }, PEER);
    await h1.engine.start({ instanceId: 'parent', name: 'P' });
    await h1.engine.start({ instanceId: 'kid', name: 'K', parent: { instanceId: 'parent', taskId: 1, name: 'P' } });
    await tick(5);
    await h1.engine.terminate('parent', undefined);
    h1.engine.close();
    // a new engine on the same store: what the old one had in flight comes back
    const h2 = await harness(h1.store);
    await h2.engine.recover();
    await tick(20);
    expect(h2.items.some((w) => 'activityRequest' in w && w.activityRequest.orchestrationInstance.instanceId === 'r' && w.activityRequest.taskId === 1)).toBe(true);
    expect((await h2.engine.get('kid'))?.status).toBe('TERMINATED');
    await h2.engine.completeActivity({ instanceId: 'r', taskId: 1, result: { value: '5' } }, PEER);
    await tick(5);
    const run = h2.runs().find((r) => r.instanceId === 'r');
    expect(completedIds(run?.newEvents ?? [])).toEqual([1]);
  });
});
