/**
 * Workflow time on fake time: the engine, its workers and its in-process durable timers run on
 * a ManualClock, so timers, delayed starts, stall retries, abandoned work and the retries of
 * what could not be stored happen when the test moves the clock: exactly then, never before,
 * and without waiting.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.ts';
import { STALL_RETRY_MS } from '../../sidecar/src/workflows/stalls.ts';
import { RETRY_MS } from '../../sidecar/src/workflows/runs.ts';
import { REFIRE_MS, Timers } from '../../sidecar/src/workflows/timers.ts';
import { ABANDON_PAUSE_MS } from '../../sidecar/src/workflows/workers.ts';
import { toTimestamp, type OrchestratorRequest, type WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { PEER, engineHarness, kindOf, log, type EngineHarness } from './harness.ts';

const HOUR = 3_600_000;
const open: EngineHarness[] = [];
afterEach(() => {
  for (const h of open.splice(0)) h.engine.close();
});

async function onFakeTime() {
  const clock = new ManualClock();
  const h = await engineHarness(undefined, { clock });
  open.push(h);
  /** Moves the clock, then waits until the engine has nothing left to do. */
  const advance = async (ms: number) => {
    await clock.advance(ms);
    await h.settle();
  };
  return { ...h, clock, advance };
}

const runsOf = (h: EngineHarness, id: string) => h.runs().filter((r) => r.instanceId === id);
const newKinds = (r: OrchestratorRequest | undefined) => (r?.newEvents ?? []).map(kindOf);

describe('workflow time (ManualClock)', () => {
  it('a durable timer fires when the clock reaches its time, not a millisecond before', async () => {
    const h = await onFakeTime();
    await h.engine.start({ instanceId: 't', name: 'W' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 't', actions: [{ id: 1, createTimer: { fireAt: toTimestamp(h.clock.now() + HOUR) } }] }, PEER);
    await h.advance(HOUR - 1);
    expect(runsOf(h, 't')).toHaveLength(1);
    await h.advance(1);
    expect(runsOf(h, 't')).toHaveLength(2);
    expect(newKinds(runsOf(h, 't')[1])).toEqual(['orchestratorStarted', 'timerFired']);
    expect(runsOf(h, 't')[1].newEvents[0].timestamp).toEqual(toTimestamp(h.clock.now()));
  });

  it('a delayed start stays PENDING, with no run, until its start time', async () => {
    const h = await onFakeTime();
    await h.engine.start({ instanceId: 'd', name: 'W', scheduledStart: h.clock.now() + 10 * HOUR });
    await h.advance(10 * HOUR - 1);
    expect(runsOf(h, 'd')).toHaveLength(0);
    expect((await h.engine.get('d'))?.status).toBe('PENDING');
    await h.advance(1);
    expect(newKinds(runsOf(h, 'd')[0])).toEqual(['orchestratorStarted', 'executionStarted']);
    expect((await h.engine.get('d'))?.scheduledStart).toBeUndefined();
  });

  it('a stalled instance waits without spinning, runs again after STALL_RETRY_MS, and at once when a worker connects', async () => {
    const h = await onFakeTime();
    await h.engine.start({ instanceId: 's', name: 'W' });
    await h.settle();
    const stall = () => h.engine.completeOrchestrator({ instanceId: 's', actions: [{ id: 0, workflowVersionNotAvailable: {} }] }, PEER);
    await stall();
    await h.advance(STALL_RETRY_MS - 1);
    expect(runsOf(h, 's')).toHaveLength(1);
    await h.advance(1);
    expect(runsOf(h, 's')).toHaveLength(2);
    await stall();
    await h.advance(STALL_RETRY_MS / 2);
    expect(runsOf(h, 's')).toHaveLength(2);
    // a worker connects: tried at once, without waiting for the clock
    h.workers.addStream({ getPeer: () => 'ipv4:127.0.0.1:2', write: (w: WorkItem) => h.stream.write(w), end: () => undefined } as never);
    await h.settle();
    expect(runsOf(h, 's')).toHaveLength(3);
    expect((await h.engine.get('s'))?.stalled?.reason).toBe('VERSION_NOT_AVAILABLE');
  });

  it('work given back (AbandonTask*) is dispatched again after ABANDON_PAUSE_MS', async () => {
    const h = await onFakeTime();
    await h.engine.start({ instanceId: 'a', name: 'W' });
    await h.settle();
    const token = h.items.at(-1)?.completionToken as string;
    expect(h.workers.abandon('run', token)).toBe(true);
    await h.advance(ABANDON_PAUSE_MS - 1);
    expect(runsOf(h, 'a')).toHaveLength(1);
    await h.advance(1);
    expect(runsOf(h, 'a')).toHaveLength(2);

    await h.engine.completeOrchestrator({ instanceId: 'a', actions: [{ id: 1, scheduleTask: { name: 'act' } }] }, PEER);
    await h.settle();
    const activity = h.items.at(-1) as WorkItem;
    expect('activityRequest' in activity).toBe(true);
    expect(h.workers.abandon('activity', activity.completionToken as string)).toBe(true);
    await h.advance(ABANDON_PAUSE_MS - 1);
    expect(h.activities).toHaveLength(1);
    await h.advance(1);
    expect(h.activities).toHaveLength(2);
  });

  it('an activity result that could not be stored has the activity run again after RETRY_MS', async () => {
    const h = await onFakeTime();
    await h.engine.start({ instanceId: 'r', name: 'W' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'r', actions: [{ id: 1, scheduleTask: { name: 'act' } }] }, PEER);
    await h.settle();
    expect(h.activities).toHaveLength(1);
    h.slow.fail = 1;
    await expect(h.engine.completeActivity({ instanceId: 'r', taskId: 1, result: { value: '1' } }, PEER)).rejects.toThrow(/store is down/);
    await h.advance(RETRY_MS - 1);
    expect(h.activities).toHaveLength(1);
    await h.advance(1);
    expect(h.activities).toHaveLength(2);
    await h.engine.completeActivity({ instanceId: 'r', taskId: 1, result: { value: '1' } }, PEER);
    await h.settle();
    expect(newKinds(runsOf(h, 'r').at(-1))).toEqual(['orchestratorStarted', 'taskCompleted']);
  });

  it('an in-process timer whose delivery fails fires again after REFIRE_MS', async () => {
    const clock = new ManualClock();
    const timers = new Timers(undefined, log, clock);
    const fired: number[] = [];
    let failures = 1;
    timers.onFire(async () => {
      fired.push(clock.now());
      if (failures-- > 0) throw new Error('the store is down (test)');
    });
    const start = clock.now();
    await timers.arm({ instanceId: 'x', executionId: 'e', timerId: '1' }, start + 5000);
    await timers.arm({ instanceId: 'x', executionId: 'e', timerId: '2' }, start + 7000);
    await timers.cancel({ instanceId: 'x', executionId: 'e', timerId: '2' });
    await clock.advance(5000 + REFIRE_MS + 10_000);
    expect(fired.map((t) => t - start)).toEqual([5000, 5000 + REFIRE_MS]);
    timers.close();
  });
});
