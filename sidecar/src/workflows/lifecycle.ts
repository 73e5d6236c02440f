/**
 * The steps every part of the engine takes on an instance inside a mutation: make it runnable
 * (take the lease, queue a run), finish it (and tell its parent), arm and cancel its timers,
 * hand history to what it creates. Each emits events on the draft (reducer.ts) and defers what
 * touches the outside world to the draft's effects, which run once the write succeeded.
 */
import type { EngineDeps } from './deps.ts';
import { WorkflowError } from './errors.ts';
import type { Draft } from './instances.ts';
import { OrchestrationStatus, sv, toTimestamp, type FailureDetails, type HistoryEvent, type PropagatedHistory, type RuntimeStatus } from './proto.ts';
import { propagate, propagateFrom } from './propagation.ts';
import { isTerminal, type InstanceState, type ParentRef } from './record.ts';
import type { TimerRef } from './timers.ts';
import type { Waiters } from './waiters.ts';

/** A lease older than this, held by another replica, is taken over when work arrives. */
export const STALE_LEASE_MS = 60_000;

/** How a finished child ended, as its parent is told. */
export interface ChildOutcome {
  status: RuntimeStatus;
  output?: string;
  failure?: FailureDetails;
}

export class Lifecycle {
  private readonly deps: EngineDeps;
  readonly waiters: Waiters;

  constructor(deps: EngineDeps, waiters: Waiters) {
    this.deps = deps;
    this.waiters = waiters;
  }

  /** The instance's state, or NOT_FOUND. */
  existing(d: Draft, id: string): InstanceState {
    if (!d.rec) throw new WorkflowError('NOT_FOUND', `no workflow instance with id "${id}"`);
    return d.rec;
  }

  /** Takes the lease when the instance has events to show and nobody else runs it; queues a run. */
  makeRunnable(d: Draft): void {
    const rec = d.rec;
    if (!rec || isTerminal(rec.status) || rec.status === 'SUSPENDED' || rec.timers.start || (rec.inbox.length === 0 && !rec.runDue)) return;
    const { me, clock, workers } = this.deps;
    const now = clock.now();
    if (rec.lease && rec.lease.owner !== me && now - rec.lease.at < STALE_LEASE_MS) return;
    if (rec.lease?.owner !== me) d.emit({ rt: 'lease', owner: me, at: now });
    const id = rec.id;
    d.effects.push(() => workers.enqueueRun(id));
  }

  /** Moves the instance to a final status (`before`: events that lead there) and tells its parent and waiters. */
  finish(d: Draft, status: RuntimeStatus, output: string | undefined, failure: FailureDetails | undefined, before: HistoryEvent[]): void {
    const rec = d.rec as InstanceState;
    this.cancelTimers(d);
    d.emit(...before, {
      eventId: -1,
      timestamp: toTimestamp(this.deps.clock.now()),
      executionCompleted: { orchestrationStatus: OrchestrationStatus[status], result: sv(output), failureDetails: failure },
    });
    const { id, parent } = rec;
    const outcome: ChildOutcome = { status, output, failure };
    d.effects.push(() => {
      this.deps.workers.dropRun(id);
      this.deps.tracing?.finished(id, status, failure?.errorMessage);
      if (parent) void this.notifyParent(parent, id, outcome);
      this.deps.table.evict(id);
    });
    this.waiters.notifyAfter(d, id);
  }

  /** A child finished: its result goes to the parent's inbox (if that execution still waits for it). */
  async notifyParent(parent: ParentRef, childId: string, child: ChildOutcome): Promise<void> {
    const timestamp = toTimestamp(this.deps.clock.now());
    await this.deps.table
      .mutate(parent.instanceId, (d) => {
        const rec = d.rec;
        if (!rec || isTerminal(rec.status) || (parent.executionId && rec.executionId !== parent.executionId)) return;
        const taskScheduledId = parent.taskId;
        d.emit({
          rt: 'arrived',
          event:
            child.status === 'COMPLETED'
              ? { eventId: -1, timestamp, subOrchestrationInstanceCompleted: { taskScheduledId, result: sv(child.output) } }
              : {
                  eventId: -1,
                  timestamp,
                  subOrchestrationInstanceFailed: {
                    taskScheduledId,
                    failureDetails: child.failure ?? { errorType: 'SubOrchestrationTerminated', errorMessage: `sub-orchestration ${childId} ended ${child.status}` },
                  },
                },
        });
        this.makeRunnable(d);
      })
      .catch((e) => this.deps.log.error({ err: e, parent: parent.instanceId }, 'telling the parent workflow about a finished sub-orchestration failed'));
  }

  /** Arms a durable timer once the write succeeded. */
  armTimer(d: Draft, ref: TimerRef, fireAt: number): void {
    d.effects.push(() => void this.deps.timers.arm(ref, fireAt).catch((e) => this.deps.log.error({ err: e, instanceId: ref.instanceId }, 'arming a workflow timer failed')));
  }

  /** Cancels the durable timers of the instance's current execution, once the write succeeded. */
  cancelTimers(d: Draft): void {
    const rec = d.rec as InstanceState;
    const refs: TimerRef[] = Object.keys(rec.timers).map((timerId) => ({ instanceId: rec.id, executionId: rec.executionId, timerId }));
    d.effects.push(() => {
      for (const ref of refs) void this.deps.timers.cancel(ref);
    });
  }

  /** The history an action with `scope` hands over: `own` is the instance's history up to its event. */
  propagated(rec: InstanceState, scope: number, own: readonly HistoryEvent[]): PropagatedHistory | undefined {
    return propagate({ scope, own, received: rec.propagated, appId: this.deps.appId, instanceId: rec.id });
  }

  /**
   * Sends again to the workers each activity of `rec` this sidecar owns (recovery; what a rerun's
   * cut left pending): with the history it hands over and, tracing on, a new span under the
   * orchestration's that `history` names.
   */
  dispatchOwnedActivities(d: Draft, rec: InstanceState, history: readonly HistoryEvent[]): void {
    const { me, workers, tracing } = this.deps;
    const acts = Object.entries(rec.acts).filter(([, a]) => a.owner === me);
    const orch = tracing && acts.length > 0 ? tracing.orchestrationContext(history) : undefined;
    for (const [key, a] of acts) {
      const taskId = Number(key);
      const task = { instanceId: rec.id, executionId: rec.executionId, taskId, name: a.name, input: a.input, propagatedHistory: this.propagatedAt(rec, history, taskId, 'taskScheduled'), trace: tracing?.activityScheduled(rec.id, taskId, a.name, orch) };
      d.effects.push(() => workers.enqueueActivity(task));
    }
  }

  /** The same, for an activity or child created by the stored event `eventId` (recovery, rerun). */
  propagatedAt(rec: InstanceState, history: readonly HistoryEvent[], eventId: number, kind: 'taskScheduled' | 'subOrchestrationInstanceCreated'): PropagatedHistory | undefined {
    return propagateFrom(history, eventId, kind, { received: rec.propagated, appId: this.deps.appId, instanceId: rec.id });
  }
}
