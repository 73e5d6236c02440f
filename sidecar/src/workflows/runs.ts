/**
 * The worker side of the engine: the runs it sends (built from the cached state when a stream
 * has room), the answers it takes (a run's, applied by the interpreter; an activity's result),
 * and the durable timers that fire. A result that could not be stored is asked for again.
 */
import type { EngineDeps } from './deps.ts';
import type { ActionInterpreter } from './interpreter.ts';
import type { Lifecycle } from './lifecycle.ts';
import { runRequest } from './messages.ts';
import { toTimestamp, type ActivityResponse, type HistoryEvent, type OrchestratorRequest, type OrchestratorResponse } from './proto.ts';
import { isTerminal } from './record.ts';
import type { TimerRef } from './timers.ts';
import type { ActivityTask, OrchestratorRun } from './workers.ts';

/** Delay before work whose result could not be stored is dispatched again. */
export const RETRY_MS = 1000;

export class Runs {
  private readonly deps: EngineDeps;
  private readonly life: Lifecycle;
  private readonly interpreter: ActionInterpreter;

  constructor(deps: EngineDeps, life: Lifecycle, interpreter: ActionInterpreter) {
    this.deps = deps;
    this.life = life;
    this.interpreter = interpreter;
  }

  /** Called by Workers when a stream has room: the run to send, or undefined when there is none. */
  async prepare(id: string): Promise<{ request: OrchestratorRequest; run: OrchestratorRun } | undefined> {
    const { table, me, clock } = this.deps;
    const c = table.get(id);
    const history = await table.history(c);
    const rec = c.rec;
    if (!rec || isTerminal(rec.status) || rec.status === 'SUSPENDED' || rec.timers.start) return undefined;
    if (rec.lease?.owner !== me || (rec.inbox.length === 0 && !rec.runDue)) return undefined;
    const started: HistoryEvent = { eventId: -1, timestamp: toTimestamp(clock.now()), orchestratorStarted: {} };
    return { run: { executionId: rec.executionId, taken: rec.inbox.length, started }, request: runRequest(rec, history, started) };
  }

  /** An activity still waits for its result (unknown when the instance is not cached: send it). */
  activityWanted(t: ActivityTask): boolean {
    const c = this.deps.table.peek(t.instanceId);
    if (!c?.loaded) return true;
    return !!c.rec && c.rec.executionId === t.executionId && !!c.rec.acts[String(t.taskId)];
  }

  async completeOrchestrator(res: OrchestratorResponse, peer: string): Promise<void> {
    const { workers, table, clock, log } = this.deps;
    const id = res.instanceId;
    const run = workers.answerRun(id, peer);
    if (!run) {
      log.debug({ instanceId: id }, 'orchestrator answer for a run that is not in flight here; ignored');
      return;
    }
    try {
      await table.mutate(id, (d) => this.interpreter.apply(d, run, res));
      workers.finishRun(id);
    } catch (e) {
      // not stored: the run is asked for again, a little later (its answer is deterministic)
      workers.finishRun(id);
      clock.after(RETRY_MS, () => workers.enqueueRun(id));
      throw e;
    }
  }

  async completeActivity(res: ActivityResponse, peer: string): Promise<void> {
    const { workers, table, clock } = this.deps;
    const id = res.instanceId;
    const task = workers.takeActivity(id, res.taskId, peer);
    const timestamp = toTimestamp(clock.now());
    await table
      .mutate(id, (d) => {
        const rec = d.rec;
        if (!rec || isTerminal(rec.status)) return;
        if (task && task.executionId !== rec.executionId) return;
        if (!rec.acts[String(res.taskId)]) return; // answered already (a re-dispatched copy) or from an old execution
        d.emit({
          rt: 'arrived',
          event: res.failureDetails
            ? { eventId: -1, timestamp, taskFailed: { taskScheduledId: res.taskId, failureDetails: res.failureDetails } }
            : { eventId: -1, timestamp, taskCompleted: { taskScheduledId: res.taskId, result: res.result ?? undefined } },
        });
        const tracing = this.deps.tracing;
        if (tracing) d.effects.push(() => tracing.activityDone(id, res.taskId, res.failureDetails?.errorMessage ?? undefined));
        this.life.makeRunnable(d);
      })
      .catch((e) => {
        // not stored: the activity runs again rather than its result being lost
        if (task) clock.after(RETRY_MS, () => workers.enqueueActivity(task));
        throw e;
      });
  }

  /** A durable timer fired: a TimerFired for the next run, or a delayed start reached. */
  async timerFired(t: TimerRef): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.table.mutate(t.instanceId, (d) => {
      const rec = d.rec;
      if (!rec || isTerminal(rec.status) || rec.executionId !== t.executionId) return;
      const timer = rec.timers[t.timerId];
      if (!timer) return;
      if (t.timerId !== 'start') {
        d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(now), timerFired: { fireAt: toTimestamp(timer.fireAt), timerId: Number(t.timerId) } } });
      } else d.emit({ rt: 'startDue', at: now });
      this.life.makeRunnable(d);
    });
  }
}
