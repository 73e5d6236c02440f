/**
 * The engine without gRPC: a fake worker stream receives work items, the test answers them,
 * and writes the test holds back widen the windows where runs could overlap. Nothing sleeps:
 * `settle()` waits until the engine has nothing left to do.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { HistoryEvent, OrchestratorRequest } from '../../sidecar/src/workflows/proto.ts';
import { PEER, engineHarness, kindOf, type EngineHarness } from './harness.ts';

const open: EngineHarness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.engine.close();
});

async function harness(existing?: EngineHarness['store']): Promise<EngineHarness> {
  const h = await engineHarness(existing);
  open.push(h);
  return h;
}

const completedIds = (events: HistoryEvent[]) => events.flatMap((e) => (e.taskCompleted ? [e.taskCompleted.taskScheduledId] : []));

/** Resolves once `cond` holds, checking after each turn of the event loop (no wall-clock wait). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

describe('workflow engine runs', () => {
  it('never starts a run while the previous answer is still being stored', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'w', name: 'W' });
    await h.settle();
    expect(h.runs()).toHaveLength(1);
    // run 1 schedules two activities
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [{ id: 1, scheduleTask: { name: 'a' } }, { id: 2, scheduleTask: { name: 'a' } }] }, PEER);
    await h.settle();
    await h.engine.completeActivity({ instanceId: 'w', taskId: 1, result: { value: '1' } }, PEER);
    await h.settle();
    expect(h.runs()).toHaveLength(2);
    // activity 2's result is being stored (held back) when the answer of run 2 arrives
    let release = () => undefined as void;
    h.slow.until = new Promise<void>((r) => (release = r));
    const writes = h.writes();
    const result2 = h.engine.completeActivity({ instanceId: 'w', taskId: 2, result: { value: '2' } }, PEER);
    await until(() => h.writes() > writes);
    const answer = h.engine.completeOrchestrator({ instanceId: 'w', actions: [] }, PEER);
    h.slow.until = undefined;
    release();
    await Promise.all([result2, answer]);
    await h.settle();
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
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [{ id: 3, completeOrchestration: { orchestrationStatus: 1, result: { value: '"done"' } } }] }, PEER);
    expect((await h.engine.get('w'))?.status).toBe('COMPLETED');
  });

  it('ignores a second answer to the same run and answers from another peer', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'x', name: 'W' });
    await h.settle();
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
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 's', actions: [] }, PEER);
    await h.engine.suspend('s');
    await h.engine.raiseEvent('s', 'go', '1');
    await h.settle();
    expect(h.runs()).toHaveLength(1);
    await h.engine.resume('s');
    await h.settle();
    const last = h.runs().at(-1) as OrchestratorRequest;
    expect(last.newEvents.map(kindOf)).toEqual([
      'orchestratorStarted',
      'executionSuspended',
      'eventRaised',
      'executionResumed',
    ]);
  });

  it('after a restart, resumes pending runs and activities, and ends children of a terminated parent', async () => {
    const h1 = await harness();
    await h1.engine.start({ instanceId: 'r', name: 'W' });
    await h1.settle();
    await h1.engine.completeOrchestrator({ instanceId: 'r', actions: [{ id: 1, scheduleTask: { name: 'act' } }] }, PEER);
    await h1.engine.start({ instanceId: 'parent', name: 'P' });
    await h1.engine.start({ instanceId: 'kid', name: 'K', parent: { instanceId: 'parent', taskId: 1, name: 'P' } });
    await h1.settle();
    await h1.engine.terminate('parent', undefined);
    h1.engine.close();
    // a new engine on the same store: what the old one had in flight comes back
    const h2 = await harness(h1.store);
    await h2.engine.recover();
    await h2.settle();
    expect(h2.items.some((w) => 'activityRequest' in w && w.activityRequest.orchestrationInstance.instanceId === 'r' && w.activityRequest.taskId === 1)).toBe(true);
    expect((await h2.engine.get('kid'))?.status).toBe('TERMINATED');
    await h2.engine.completeActivity({ instanceId: 'r', taskId: 1, result: { value: '5' } }, PEER);
    await h2.settle();
    const run = h2.runs().find((r) => r.instanceId === 'r');
    expect(completedIds(run?.newEvents ?? [])).toEqual([1]);
  });

  it('terminate without recursion leaves the children running; with it, ends them', async () => {
    const h = await harness();
    for (const id of ['flat', 'deep']) {
      await h.engine.start({ instanceId: id, name: 'P' });
      await h.settle();
      await h.engine.completeOrchestrator({ instanceId: id, actions: [{ id: 1, createSubOrchestration: { instanceId: `${id}-kid`, name: 'K' } }] }, PEER);
      await h.settle();
    }
    expect((await h.engine.get('flat-kid'))?.status).toBe('PENDING');
    await h.engine.terminate('flat', undefined, false);
    await h.engine.terminate('deep', undefined, true);
    await h.settle();
    expect((await h.engine.get('flat'))?.status).toBe('TERMINATED');
    expect((await h.engine.get('flat-kid'))?.status).toBe('PENDING');
    expect((await h.engine.get('deep-kid'))?.status).toBe('TERMINATED');
  });

  it('an unsupported action among supported ones fails the run before any of them is carried out', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'mixed', name: 'W' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'mixed', actions: [{ id: 0, scheduleTask: { name: 'never' } }, { id: 1, createDetachedWorkflow: {} }] }, PEER);
    await h.settle();
    expect((await h.engine.get('mixed'))?.status).toBe('FAILED');
    expect(h.activities).toEqual([]);
  });
});
