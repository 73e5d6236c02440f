/**
 * An instance's state is a function of its journal. fast-check drives the engine (no gRPC: a
 * fake worker stream, a store in memory, timers fired by the test) through generated
 * histories: starts (delayed too), runs answered with activities, timers, sub-orchestrations,
 * events to other instances, completions, failures, continue-as-new with carried events,
 * version stalls and patch mismatches, activity results, fired timers, raised events,
 * suspend/resume, terminate, purge and reruns. After every step, every instance's stored record
 * equals the replay of its stored journal (`applyEvent` from nothing), and so does the history
 * the engine shows; a record deleted from the store is rebuilt from the journal alone.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { toTimestamp, type HistoryEvent, type OrchestratorAction, type OrchestratorRequest } from '../../sidecar/src/workflows/proto.ts';
import type { InstanceRecord, InstanceState } from '../../sidecar/src/workflows/record.ts';
import { InstanceTable } from '../../sidecar/src/workflows/instances.ts';
import { SHOWN } from '../../sidecar/src/workflows/journal.ts';
import { JOURNAL_FORMAT, isEngineEvent, replay, stateOf, type InstanceEvent } from '../../sidecar/src/workflows/reducer.ts';
import { PEER, PREFIX, engineHarness, kindOf, log, timerKey, type EngineHarness } from './harness.ts';

const engines: EngineHarness[] = [];
afterEach(() => {
  for (const h of engines.splice(0)) h.engine.close();
});

/** A harness that also knows every instance id the test has seen. */
async function harness(shared = false) {
  const h = await engineHarness(undefined, { shared });
  engines.push(h);
  const ids = new Set<string>();
  return { ...h, ids };
}

type Harness = Awaited<ReturnType<typeof harness>>;

const parse = <T>(v: Uint8Array): T => JSON.parse(Buffer.from(v).toString('utf8')) as T;

/** The stored record and journal of an instance, straight from the store (h0 is the journal's first batch, or says where it starts). */
async function stored(store: StateStore, id: string): Promise<{ rec?: InstanceRecord; journal: InstanceEvent[]; from: number; end: number }> {
  const m = await store.get(`${PREFIX}${id}||m`);
  const rec = m ? parse<InstanceRecord>(m.value) : undefined;
  const head = await store.get(`${PREFIX}${id}||h0`);
  const pointer = head && parse<unknown[] | { journalFrom: number }>(head.value);
  const from = !pointer || Array.isArray(pointer) ? 0 : pointer.journalFrom;
  const journal: InstanceEvent[] = [];
  let end = from;
  for (let it = head && from === 0 ? head : await store.get(`${PREFIX}${id}||h${from}`); it; it = await store.get(`${PREFIX}${id}||h${++end}`)) journal.push(...parse<InstanceEvent[]>(it.value));
  return { rec, journal, from, end: head ? end : 0 };
}

/** What readers of a stored record see. */
const shownOf = (r: InstanceState | undefined) => r && Object.fromEntries(SHOWN.map((k) => [k, r[k]]));

const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const shown = (h: readonly HistoryEvent[]) => h.filter((e) => !e.orchestratorCompleted);

/**
 * Every instance is its journal replayed: the state the engine holds, the state a fresh table
 * loads from the store, the history shown; the stored record shows what the replay shows (it is
 * rewritten when that changes, so its `chunks` may be behind the journal's end).
 */
async function checkAll(h: Harness, kinds: Set<string>): Promise<void> {
  const fresh = new InstanceTable({ store: h.store, prefix: PREFIX, shared: h.table.shared, replicaId: 'other', log });
  for (const id of h.ids) {
    const { rec, journal, from, end } = await stored(h.store, id);
    if (!rec) {
      expect(end, `${id}: no record, so no journal`).toBe(0);
      continue;
    }
    expect(rec.fmt).toBe(JOURNAL_FORMAT);
    expect(rec.from ?? 0).toBe(from);
    expect(rec.chunks).toBeLessThanOrEqual(end);
    const first = journal[0];
    expect(first && isEngineEvent(first) && first.rt).toBe('begin');
    for (const e of journal) kinds.add(isEngineEvent(e) ? e.rt : kindOf(e));
    const replayed = replay(json(journal));
    expect(json(shownOf(replayed.rec)), `${id}: stored record`).toEqual(shownOf(rec));
    const cached = h.table.peek(id);
    if (cached?.loaded && cached.rec) {
      expect(json(stateOf(cached.rec)), `${id}: cached state`).toEqual(json(replayed.rec));
      expect(cached.rec.chunks).toBe(end);
    }
    const c = fresh.get(id);
    await fresh.history(c);
    expect(json(c.rec && stateOf(c.rec)), `${id}: state loaded from the store`).toEqual(json(replayed.rec));
    expect(json(await h.engine.history(id)), `${id}: history shown`).toEqual(shown(replayed.history));
  }
}

type Step =
  | { op: 'start'; n: number; delayed: boolean }
  | { op: 'answer'; n: number; acts: ('task' | 'timer' | 'child' | 'send' | 'complete' | 'fail' | 'can')[]; stall: 0 | 1 | 2 | 3; patch: number; status: boolean }
  | { op: 'activity'; n: number; fail: boolean }
  | { op: 'timer'; n: number }
  | { op: 'raise' | 'suspend' | 'resume' | 'purge'; n: number }
  | { op: 'terminate'; n: number; recursive: boolean }
  | { op: 'rerun'; n: number; at: number; input: boolean };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('start' as const), n: fc.nat(3), delayed: fc.boolean() }),
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('answer' as const),
      n: fc.nat(),
      acts: fc.array(fc.constantFrom('task', 'task', 'timer', 'child', 'send', 'complete', 'fail', 'can'), { maxLength: 4 }),
      stall: fc.constantFrom(0, 0, 0, 1, 2, 3),
      patch: fc.nat(3),
      status: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('activity' as const), n: fc.nat(), fail: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('timer' as const), n: fc.nat() }) },
  fc.record({ op: fc.constantFrom('raise' as const, 'suspend' as const, 'resume' as const, 'purge' as const), n: fc.nat() }),
  fc.record({ op: fc.constant('terminate' as const), n: fc.nat(), recursive: fc.boolean() }),
  fc.record({ op: fc.constant('rerun' as const), n: fc.nat(), at: fc.nat(), input: fc.boolean() }),
);

const pick = <T>(list: T[], n: number): T | undefined => (list.length ? list[n % list.length] : undefined);

async function perform(h: Harness, s: Step, seq: { next: number }): Promise<void> {
  for (const id of h.open.keys()) h.ids.add(id);
  const known = [...h.ids];
  const ignore = () => undefined;
  switch (s.op) {
    case 'start': {
      const id = `w${s.n}`;
      h.ids.add(id);
      await h.engine.start({ instanceId: id, name: 'W', input: `"${seq.next}"`, scheduledStart: s.delayed ? Date.now() + 3_600_000 : undefined }).catch(ignore);
      break;
    }
    case 'answer': {
      const id = pick([...h.open.keys()], s.n);
      if (!id) return;
      h.open.delete(id);
      const actions: OrchestratorAction[] = [];
      if (s.stall === 1) actions.push({ id: seq.next++, workflowVersionNotAvailable: {} });
      for (const kind of s.acts) {
        const aid = seq.next++;
        if (kind === 'task') actions.push({ id: aid, scheduleTask: { name: 'act', input: { value: String(aid) } } });
        else if (kind === 'timer') actions.push({ id: aid, createTimer: { fireAt: toTimestamp(Date.now() + 60_000) } });
        else if (kind === 'child') actions.push({ id: aid, createSubOrchestration: { instanceId: '', name: 'C', input: { value: '1' } } });
        else if (kind === 'send') actions.push({ id: aid, sendEvent: { instance: { instanceId: pick(known, aid) ?? 'w0' }, name: 'ping', data: { value: '2' } } });
        else if (kind === 'complete') actions.push({ id: aid, completeOrchestration: { orchestrationStatus: 1, result: { value: `"done ${aid}"` } } });
        else if (kind === 'fail') actions.push({ id: aid, completeOrchestration: { orchestrationStatus: 3, failureDetails: { errorType: 'E', errorMessage: 'boom' } } });
        else {
          const carried: HistoryEvent = { eventId: -1, eventRaised: { name: 'carried', input: { value: '3' } } };
          actions.push({ id: aid, completeOrchestration: { orchestrationStatus: 2, result: { value: `"next ${aid}"` }, carryoverEvents: [carried], newVersion: aid % 2 ? { value: 'v2' } : undefined } });
        }
      }
      // patches: the first answer records some; a later one with others is a mismatch (a stall)
      const version = s.stall === 2 ? { patches: [`p${s.patch}`], name: 'v' } : s.stall === 3 ? { patches: ['p0', `p${s.patch}`] } : undefined;
      await h.engine.completeOrchestrator({ instanceId: id, actions, version, customStatus: s.status ? { value: `cs${seq.next}` } : undefined }, PEER).catch(ignore);
      break;
    }
    case 'activity': {
      const i = h.activities.length ? s.n % h.activities.length : -1;
      if (i < 0) return;
      const [a] = h.activities.splice(i, 1);
      const res = s.fail ? { failureDetails: { errorType: 'E', errorMessage: 'activity failed' } } : { result: { value: `r${a.taskId}` } };
      await h.engine.completeActivity({ instanceId: a.orchestrationInstance.instanceId, taskId: a.taskId, ...res }, PEER).catch(ignore);
      break;
    }
    case 'timer': {
      const t = pick([...h.timers.armed.values()], s.n);
      if (!t) return;
      h.timers.armed.delete(timerKey(t));
      await h.timers.fire(t).catch(ignore);
      break;
    }
    case 'raise':
    case 'suspend':
    case 'resume':
    case 'purge': {
      const id = pick(known, s.n);
      if (!id) return;
      if (s.op === 'raise') await h.engine.raiseEvent(id, 'ping', '"x"').catch(ignore);
      else if (s.op === 'suspend') await h.engine.suspend(id, 'why').catch(ignore);
      else if (s.op === 'resume') await h.engine.resume(id, 'why').catch(ignore);
      else await h.engine.purge(id, true).catch(ignore);
      break;
    }
    case 'terminate': {
      const id = pick(known, s.n);
      if (id) await h.engine.terminate(id, '"stop"', s.recursive).catch(ignore);
      break;
    }
    case 'rerun': {
      const id = pick(known, s.n);
      if (!id) return;
      const events = await h.engine.history(id).catch(() => []);
      const from = pick(
        events.filter((e) => e.taskScheduled || e.timerCreated),
        s.at,
      );
      if (!from) return;
      const newId = `r${seq.next++}`;
      h.ids.add(newId);
      await h.engine.rerun({ sourceId: id, eventId: from.eventId, newId, input: s.input ? { value: '"new"' } : undefined }).catch(ignore);
      break;
    }
  }
}

describe('workflow state is a function of its journal', () => {
  it('property: after every step of a generated history, each instance is its journal replayed', async () => {
    const kinds = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 40 }), fc.boolean(), async (steps, shared) => {
        const h = await harness(shared);
        const seq = { next: 1 };
        try {
          for (const s of [{ op: 'start', n: 0, delayed: false } as Step, ...steps]) {
            await perform(h, s, seq);
            await h.settle();
            for (const id of h.open.keys()) h.ids.add(id);
            await checkAll(h, kinds);
          }
          // the record is a cache: without it, the journal gives it back
          for (const id of h.ids) {
            const { rec, journal } = await stored(h.store, id);
            if (!rec) continue;
            await h.store.delete({ key: `${PREFIX}${id}||m` });
            const rebuilt = await h.table.rebuild(id);
            expect(rebuilt && stateOf(json(rebuilt)), `${id}: rebuilt`).toEqual(json(replay(json(journal)).rec));
          }
        } finally {
          h.engine.close();
        }
      }),
      { numRuns: 100 },
    );
    // the generated histories did reach every kind of event the journal holds
    for (const k of ['begin', 'arrived', 'run', 'lease', 'released', 'startDue', 'taskScheduled', 'timerCreated', 'subOrchestrationInstanceCreated', 'eventSent', 'executionTerminated', 'executionCompleted', 'executionStalled']) {
      expect(kinds, `no ${k} in any generated journal`).toContain(k);
    }
  }, 120_000);

  it('a mutation that changes nothing writes nothing', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'w', name: 'W' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [{ id: 1, scheduleTask: { name: 'a' } }] }, PEER);
    await h.settle();
    const before = h.writes();
    // resume of a running instance, an answer nobody asked for, a result of an unknown task
    await h.engine.resume('w');
    await h.engine.completeOrchestrator({ instanceId: 'w', actions: [] }, PEER);
    await h.engine.completeActivity({ instanceId: 'w', taskId: 9, result: { value: '1' } }, PEER);
    await h.engine.history('w');
    await h.settle();
    expect(h.writes()).toBe(before);
  });

  it('a record found missing is rebuilt from the journal when the instance is next used', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'lost', name: 'W' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'lost', actions: [{ id: 1, scheduleTask: { name: 'a' } }] }, PEER);
    await h.settle();
    await h.store.delete({ key: `${PREFIX}lost||m` });
    // a sidecar that starts on this store: the activity's result finds the instance
    h.engine.close();
    const again = await engineHarness(h.store);
    engines.push(again);
    await again.engine.completeActivity({ instanceId: 'lost', taskId: 1, result: { value: '"r"' } }, PEER);
    await again.settle();
    expect(again.open.get('lost')?.newEvents.map(kindOf)).toEqual(['orchestratorStarted', 'taskCompleted']);
    expect((await again.engine.get('lost'))?.status).toBe('RUNNING');
  });

  it('rebuilds a deleted record from the journal, and the instance goes on from it', async () => {
    const h = await harness();
    await h.engine.start({ instanceId: 'k', name: 'W', input: '"in"' });
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'k', actions: [{ id: 1, scheduleTask: { name: 'a' } }], customStatus: { value: 'half' } }, PEER);
    await h.settle();
    const before = await stored(h.store, 'k');
    await h.store.delete({ key: `${PREFIX}k||m` });
    expect((await stored(h.store, 'k')).rec).toBeUndefined();
    const rebuilt = await h.table.rebuild('k');
    expect(stateOf(json(rebuilt as InstanceRecord))).toEqual(json(replay(before.journal).rec));
    expect((await h.engine.get('k'))?.customStatus).toBe('half');
    await h.engine.completeActivity({ instanceId: 'k', taskId: 1, result: { value: '"r"' } }, PEER);
    await h.settle();
    await h.engine.completeOrchestrator({ instanceId: 'k', actions: [{ id: 2, completeOrchestration: { orchestrationStatus: 1, result: { value: '"out"' } } }] }, PEER);
    await h.settle();
    const done = await h.engine.get('k');
    expect(done?.status).toBe('COMPLETED');
    expect(done?.output).toBe('"out"');
    expect((await h.engine.history('k')).map(kindOf)).toEqual([
      'orchestratorStarted',
      'executionStarted',
      'taskScheduled',
      'orchestratorStarted',
      'taskCompleted',
      'executionCompleted',
    ]);
  });

  it('takes over a record of an older version (state kept by hand, batches of shown history) with a journal that begins with it', async () => {
    const h = await harness();
    const ts = toTimestamp(Date.now());
    const legacy = {
      v: 3,
      id: 'old',
      name: 'W',
      status: 'RUNNING',
      createdAt: 1000,
      updatedAt: 2000,
      input: '"in"',
      executionId: 'e-old',
      chunks: 1,
      inbox: [],
      acts: { '1': { name: 'a', owner: 'local' } },
      timers: {},
      children: [],
    };
    const history: HistoryEvent[] = [
      { eventId: -1, timestamp: ts, orchestratorStarted: {} },
      { eventId: -1, timestamp: ts, executionStarted: { name: 'W', input: { value: '"in"' }, orchestrationInstance: { instanceId: 'old', executionId: { value: 'e-old' } } } },
      { eventId: 1, timestamp: ts, taskScheduled: { name: 'a' } },
      { eventId: -1, timestamp: ts, orchestratorCompleted: {} },
    ];
    await h.store.bulkSet([
      { key: `${PREFIX}old||m`, value: Buffer.from(JSON.stringify(legacy)) },
      { key: `${PREFIX}old||h0`, value: Buffer.from(JSON.stringify(history)) },
    ]);
    h.ids.add('old');
    await h.engine.completeActivity({ instanceId: 'old', taskId: 1, result: { value: '"r"' } }, PEER);
    await h.settle();
    const after = await stored(h.store, 'old');
    expect(after.rec?.fmt).toBe(JOURNAL_FORMAT);
    // the journal begins after the old batch, which h0 now points past
    expect([after.from, after.end]).toEqual([1, 2]);
    await checkAll(h, new Set());
    const run = h.open.get('old') as OrchestratorRequest;
    expect(run.pastEvents.map(kindOf)).toEqual(['orchestratorStarted', 'executionStarted', 'taskScheduled']);
    expect(run.newEvents.map(kindOf)).toEqual(['orchestratorStarted', 'taskCompleted']);
  });
});
