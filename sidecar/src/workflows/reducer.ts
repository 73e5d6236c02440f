/**
 * An instance's runtime state is a function of its journal: `applyEvent(state, event)` is the
 * only code that changes it, as durabletask-go derives its runtime state from the history.
 *
 * The journal of one execution is what the table stores in batches (`…||h<n>`), one batch per
 * write. It holds two kinds of entries:
 * - Durable Task history events that happen in the history itself: the events of the actions a
 *   run applied (TaskScheduled, TimerCreated, SubOrchestrationInstanceCreated, EventSent), and
 *   ExecutionTerminated, ExecutionCompleted, ExecutionStalled;
 * - engine events (`rt`), never shown to a worker: a journal's `begin`, an event `arrived` in the
 *   inbox, a `run` applied (its OrchestratorStarted, then the first `taken` inbox events, move to
 *   the history), the run lease taken or released, work `adopted` from a dead replica, a delayed
 *   start reached, `purged`.
 *
 * The history shown to workers (pastEvents) is therefore also a product of the journal: the
 * inbox events a run consumed appear after its OrchestratorStarted, where the worker saw them.
 *
 * Every journal starts with a `begin`, which carries what no history event says: when the
 * instance was created, who holds its lease, and what a continue-as-new carries into the next
 * execution (custom status, children, the history it received), or what a rerun starts from (the
 * kept history and the work pending at the cut). A `begin` later in a write starts a new journal
 * (continue-as-new, a restart of a finished id): the batches before it are dropped.
 */
import { STATUS_BY_NUMBER, StalledReason, fromTimestamp, type HistoryEvent, type StallReason } from './proto.ts';
import type { InstanceRecord, InstanceState, ParentRef } from './record.ts';

/** `InstanceRecord.fmt` of records whose batches are a journal. */
export const JOURNAL_FORMAT = 2;

/** What a journal starts from; everything not given takes its empty value. */
export type BeginState = Pick<InstanceState, 'id' | 'status' | 'createdAt'> & Partial<InstanceState>;

/** Engine facts that are not Durable Task history events. */
export type EngineEvent =
  | { rt: 'begin'; state: BeginState; history?: HistoryEvent[] }
  /** An event for the next run: ExecutionStarted, results, fired timers, raised events, suspend/resume markers. */
  | { rt: 'arrived'; event: HistoryEvent }
  /** A run's answer was applied: `started` and the first `taken` inbox events join the history. */
  | { rt: 'run'; started: HistoryEvent; taken: number; at: number; customStatus?: string }
  | { rt: 'lease'; owner: string; at: number }
  | { rt: 'released' }
  /** The work `from` (dead replicas) owned moves to `by`. */
  | { rt: 'adopted'; from: string[]; by: string; at: number }
  /** A delayed start (scheduledStartTimestamp) was reached. */
  | { rt: 'startDue'; at: number }
  | { rt: 'purged' };

export type InstanceEvent = HistoryEvent | EngineEvent;

/** The state and the history shown to workers (ExecutionStalled and legacy OrchestratorCompleted included). */
export interface Instance {
  rec: InstanceState | undefined;
  history: HistoryEvent[];
}

export function isEngineEvent(e: InstanceEvent): e is EngineEvent {
  return 'rt' in e;
}

/**
 * The instance after `e`. `s` is the caller's working copy: its record and history are changed
 * in place (the instance table hands the reducer a draft, see instances.ts), and the events are
 * never changed, so they may be shared with the journal.
 */
export function applyEvent(s: Instance, e: InstanceEvent): Instance {
  if (!isEngineEvent(e)) {
    if (s.rec) happened(s.rec, s.history, e);
    return s;
  }
  if (e.rt === 'begin') return begin(e.state, e.history);
  if (e.rt === 'purged') return { rec: undefined, history: [] };
  const rec = s.rec;
  if (!rec) return s;
  switch (e.rt) {
    case 'arrived':
      arrived(rec, s.history, e.event);
      break;
    case 'run':
      s.history.push(e.started, ...rec.inbox.splice(0, e.taken));
      touch(rec, e.at);
      if (e.customStatus !== undefined) rec.customStatus = e.customStatus;
      if (rec.status === 'PENDING') rec.status = 'RUNNING';
      rec.startedAt ??= e.at;
      delete rec.runDue;
      delete rec.stalled;
      break;
    case 'lease':
      rec.lease = { owner: e.owner, at: e.at };
      break;
    case 'released':
      delete rec.lease;
      break;
    case 'adopted': {
      const from = new Set(e.from);
      for (const [k, a] of Object.entries(rec.acts)) if (from.has(a.owner)) rec.acts[k] = { ...a, owner: e.by };
      for (const [k, t] of Object.entries(rec.timers)) if (from.has(t.owner)) rec.timers[k] = { ...t, owner: e.by };
      if (rec.lease && from.has(rec.lease.owner)) rec.lease = { owner: e.by, at: e.at };
      break;
    }
    case 'startDue':
      delete rec.timers.start;
      delete rec.scheduledStart;
      touch(rec, e.at);
      break;
  }
  return s;
}

/** The instance a journal describes (undefined: none, or purged). */
export function replay(journal: Iterable<InstanceEvent>): Instance {
  let s: Instance = { rec: undefined, history: [] };
  for (const e of journal) s = applyEvent(s, e);
  return s;
}

/**
 * A working copy of a state: the containers the reducer changes in place are copied; events and
 * the objects it replaces whole (lease, parent, failure, stall) are shared, so a changed one is a
 * different object (journal.ts relies on it).
 */
export function draftOf<T extends InstanceState>(r: T): T {
  return { ...r, inbox: [...r.inbox], acts: { ...r.acts }, timers: { ...r.timers }, children: [...r.children] };
}

/** The state part of a stored record (without the table's bookkeeping). */
export function stateOf(r: InstanceRecord): InstanceState {
  const { v: _v, chunks: _chunks, from: _from, fmt: _fmt, ...state } = r;
  return state;
}

function begin(st: BeginState, history: HistoryEvent[] | undefined): Instance {
  const rec: InstanceState = draftOf({
    name: '',
    executionId: '',
    updatedAt: st.createdAt,
    ...st,
    inbox: st.inbox ?? [],
    acts: st.acts ?? {},
    timers: st.timers ?? {},
    children: st.children ?? [],
  });
  return { rec, history: [...(history ?? [])] };
}

function arrived(rec: InstanceState, history: readonly HistoryEvent[], e: HistoryEvent): void {
  rec.inbox.push(e);
  touchAt(rec, e);
  if (e.executionStarted) {
    const es = e.executionStarted;
    rec.name = es.name;
    rec.version = es.version?.value;
    rec.input = es.input?.value;
    rec.executionId = es.orchestrationInstance?.executionId?.value ?? rec.executionId;
    rec.parent = parentOf(es.parentInstance);
  } else if (e.executionSuspended) rec.status = 'SUSPENDED';
  else if (e.executionResumed) rec.status = rec.startedAt !== undefined || history.length > 0 ? 'RUNNING' : 'PENDING';
  else if (e.taskCompleted) delete rec.acts[String(e.taskCompleted.taskScheduledId)];
  else if (e.taskFailed) delete rec.acts[String(e.taskFailed.taskScheduledId)];
  else if (e.timerFired) delete rec.timers[String(e.timerFired.timerId)];
}

/** A history event that happened now (not an inbox event): it joins the history and has its effect. */
function happened(rec: InstanceState, history: HistoryEvent[], e: HistoryEvent): void {
  history.push(e);
  const owner = rec.lease?.owner ?? '';
  if (e.taskScheduled) {
    rec.acts[String(e.eventId)] = { name: e.taskScheduled.name, input: e.taskScheduled.input?.value, owner };
    if (rec.rerunInput?.taskId === e.eventId) delete rec.rerunInput;
  } else if (e.timerCreated) {
    rec.timers[String(e.eventId)] = { fireAt: fromTimestamp(e.timerCreated.fireAt) ?? fromTimestamp(e.timestamp) ?? rec.updatedAt, owner };
  } else if (e.subOrchestrationInstanceCreated) {
    if (!rec.children.includes(e.subOrchestrationInstanceCreated.instanceId)) rec.children.push(e.subOrchestrationInstanceCreated.instanceId);
  } else if (e.executionTerminated) {
    if (e.executionTerminated.recurse) rec.terminatedRecursively = true;
  } else if (e.executionCompleted) {
    const c = e.executionCompleted;
    rec.status = STATUS_BY_NUMBER[c.orchestrationStatus] ?? 'COMPLETED';
    rec.output = c.result?.value;
    rec.failure = c.failureDetails ?? undefined;
    rec.inbox = [];
    rec.acts = {};
    rec.timers = {};
    delete rec.lease;
    delete rec.stalled;
    touchAt(rec, e);
  } else if (e.executionStalled) {
    const s = e.executionStalled;
    rec.stalled = { reason: stallReason(s.reason), since: fromTimestamp(e.timestamp) ?? rec.updatedAt, description: s.description ?? undefined };
    touchAt(rec, e);
  }
}

function touch(rec: InstanceState, at: number): void {
  if (at > rec.updatedAt) rec.updatedAt = at;
}

function touchAt(rec: InstanceState, e: HistoryEvent): void {
  const at = fromTimestamp(e.timestamp);
  if (at !== undefined) touch(rec, at);
}

function stallReason(n: number): StallReason {
  return (Object.keys(StalledReason) as StallReason[]).find((k) => StalledReason[k] === n) ?? 'VERSION_NOT_AVAILABLE';
}

/** The parent named by ExecutionStartedEvent.parentInstance. */
function parentOf(p: NonNullable<HistoryEvent['executionStarted']>['parentInstance']): ParentRef | undefined {
  if (!p?.orchestrationInstance) return undefined;
  return {
    instanceId: p.orchestrationInstance.instanceId,
    executionId: p.orchestrationInstance.executionId?.value,
    taskId: p.taskScheduledId,
    name: p.name?.value ?? '',
    version: p.version?.value,
  };
}
