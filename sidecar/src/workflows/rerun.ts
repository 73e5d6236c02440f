/**
 * RerunWorkflowFromEvent: a new instance that starts from a finished one's history, cut just
 * before one of its activities (a TaskScheduled event) or timers (TimerCreated). The orchestrator
 * replays the kept history and schedules that activity again (or creates that timer again: its
 * time has passed, so it fires at once), as the reference runtime does; what was still pending
 * at the cut (activities scheduled earlier whose results came later, timers, sub-orchestrations)
 * is pending again.
 */
import { WorkflowError } from './errors.ts';
import { fromTimestamp, type HistoryEvent } from './proto.ts';

export interface RerunStart {
  /** The kept history, with ExecutionStarted pointing at the new instance. */
  history: HistoryEvent[];
  /** Activities scheduled in the kept history and not answered there, by task id. */
  acts: Record<string, { name: string; input?: string }>;
  /** Timers created in the kept history and not fired there, by timer id. */
  timers: Record<string, number>;
  /** Sub-orchestrations created in the kept history and not answered there. */
  children: { taskId: number; instanceId: string; name: string; version?: string; input?: string }[];
  /** The cut is an activity's (a new input applies to it), not a timer's. */
  fromActivity: boolean;
}

/**
 * Cuts `history` before the TaskScheduled or TimerCreated event `eventId`; throws NOT_FOUND when
 * there is none (the reference runtime's answer, for child workflow events too).
 */
export function rerunStart(sourceId: string, history: readonly HistoryEvent[], eventId: number, newId: string, executionId: string, traced?: Pick<NonNullable<HistoryEvent['executionStarted']>, 'parentTraceContext' | 'orchestrationSpanID'>): RerunStart {
  const at = history.findIndex((e) => e.eventId === eventId && (e.taskScheduled || e.timerCreated));
  if (at < 0) {
    const other = history.find((e) => e.eventId === eventId && e.eventId >= 0);
    throw new WorkflowError(
      'NOT_FOUND',
      other
        ? `event ${eventId} of workflow instance "${sourceId}" is neither an activity (TaskScheduled) nor a timer (TimerCreated) event; a rerun starts from one of those`
        : `workflow instance "${sourceId}" has no event ${eventId}; a rerun starts from an activity (TaskScheduled) or timer (TimerCreated) event`,
    );
  }
  const kept = history.slice(0, at).map((e) => {
    if (!e.executionStarted) return e;
    // the new instance is its own top-level instance
    const { parentInstance: _parent, ...started } = e.executionStarted;
    // tracing on: the rerun's own spans (tracing/workflows.ts), which what it schedules is under
    return { ...e, executionStarted: { ...started, orchestrationInstance: { instanceId: newId, executionId: { value: executionId } }, ...traced } };
  });

  const answered = new Set<number>();
  const fired = new Set<number>();
  for (const e of kept) {
    const id = e.taskCompleted?.taskScheduledId ?? e.taskFailed?.taskScheduledId ?? e.subOrchestrationInstanceCompleted?.taskScheduledId ?? e.subOrchestrationInstanceFailed?.taskScheduledId;
    if (id !== undefined) answered.add(id);
    if (e.timerFired) fired.add(e.timerFired.timerId);
  }
  const out: RerunStart = { history: kept, acts: {}, timers: {}, children: [], fromActivity: !!history[at].taskScheduled };
  for (const e of kept) {
    if (e.taskScheduled && !answered.has(e.eventId)) out.acts[String(e.eventId)] = { name: e.taskScheduled.name, input: e.taskScheduled.input?.value };
    if (e.timerCreated && !fired.has(e.eventId)) out.timers[String(e.eventId)] = fromTimestamp(e.timerCreated.fireAt) ?? Date.now();
    const s = e.subOrchestrationInstanceCreated;
    if (s && !answered.has(e.eventId)) out.children.push({ taskId: e.eventId, instanceId: s.instanceId, name: s.name, version: s.version?.value, input: s.input?.value });
  }
  return out;
}
