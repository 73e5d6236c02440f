/**
 * The client API of the engine, what TaskHubSidecarService, the HTTP API and the Dapr runtime
 * API call: start (restart, rerun), raise an event, suspend, resume, terminate, purge, read the
 * state and history, wait for a state.
 */
import { randomUUID } from 'node:crypto';
import type { EngineDeps } from './deps.ts';
import { WorkflowError } from './errors.ts';
import type { ChildOutcome, Lifecycle } from './lifecycle.ts';
import { parentInfo } from './messages.ts';
import { sv, toTimestamp, type FailureDetails, type HistoryEvent, type PropagatedHistory } from './proto.ts';
import { isTerminal, type InstanceRecord, type InstanceState, type ParentRef } from './record.ts';
import { rerunStart } from './rerun.ts';
import type { CarriedContext } from '../tracing/service.ts';

export interface StartRequest {
  instanceId?: string;
  name: string;
  version?: string;
  input?: string;
  /** ms since epoch; later than now = delayed start. */
  scheduledStart?: number;
  parent?: ParentRef;
  /** History handed over by the parent (Dapr protocol history propagation). */
  propagated?: PropagatedHistory;
  /** The start call's trace context (its traceparent / tracestate), read only while tracing is on. */
  trace?: CarriedContext;
}

/** A sub-orchestration to start (or to look up): its id and parent are known. */
export type ChildStart = StartRequest & { instanceId: string; parent: ParentRef };

export interface RerunRequest {
  sourceId: string;
  /** The TaskScheduled or TimerCreated event the new instance starts before. */
  eventId: number;
  newId?: string;
  /** A new input for the activity it starts from. */
  input?: { value: string | undefined };
  /** The rerun call's trace context, read only while tracing is on. */
  trace?: CarriedContext;
}

export class ClientApi {
  private readonly deps: EngineDeps;
  private readonly life: Lifecycle;
  /** Set when new instances must not start (e.g. no durable store in a pod); the reason is the error. */
  refuseStarts: string | undefined;

  constructor(deps: EngineDeps, life: Lifecycle) {
    this.deps = deps;
    this.life = life;
  }

  async start(req: StartRequest): Promise<string> {
    if (this.refuseStarts) throw new WorkflowError('PRECONDITION', this.refuseStarts);
    const id = req.instanceId || randomUUID();
    const { me, clock } = this.deps;
    const now = clock.now();
    const traced = this.deps.tracing?.started(id, req.name, req.trace);
    await this.deps.table.mutate(id, (d) => {
      if (d.rec && !isTerminal(d.rec.status)) {
        throw new WorkflowError('CONFLICT', `workflow instance "${id}" already exists and is ${d.rec.status}; terminate or wait for it before starting it again`);
      }
      const executionId = randomUUID();
      const fireAt = req.scheduledStart ?? now;
      const delayed = fireAt > now;
      const started: HistoryEvent = {
        eventId: -1,
        timestamp: toTimestamp(now),
        executionStarted: {
          name: req.name,
          version: sv(req.version),
          input: sv(req.input),
          orchestrationInstance: { instanceId: id, executionId: { value: executionId } },
          parentInstance: parentInfo(req.parent),
          scheduledStartTimestamp: delayed ? toTimestamp(fireAt) : undefined,
          ...traced?.fields,
        },
      };
      // a finished instance with the same id is replaced: its old history goes (a new journal begins)
      if (d.rec) this.life.cancelTimers(d);
      d.emit(
        {
          rt: 'begin',
          state: { id, status: 'PENDING', createdAt: now, propagated: req.propagated, ...(delayed ? { scheduledStart: fireAt, timers: { start: { fireAt, owner: me } } } : {}) },
        },
        { rt: 'arrived', event: started },
      );
      if (delayed) this.life.armTimer(d, { instanceId: id, executionId, timerId: 'start' }, fireAt);
      else this.life.makeRunnable(d);
      this.life.waiters.notifyAfter(d, id);
    }).then(
      () => traced?.stored(),
      (e: unknown) => {
        traced?.refused((e as Error).message);
        throw e;
      },
    );
    return id;
  }

  async raiseEvent(id: string, name: string, input: string | undefined): Promise<void> {
    const timestamp = toTimestamp(this.deps.clock.now());
    await this.deps.table.mutate(id, (d) => {
      const rec = this.life.existing(d, id);
      if (isTerminal(rec.status)) return; // nothing listens any more; accepted like the ecosystem does
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp, eventRaised: { name, input: sv(input) } } });
      this.life.makeRunnable(d);
    });
  }

  /**
   * Terminates the instance; with `recursive`, its running sub-orchestrations too (and theirs).
   * HTTP and the Dapr runtime API always terminate recursively (contract; the default);
   * TaskHubSidecarService follows the request's flag.
   */
  async terminate(id: string, output: string | undefined, recursive = true): Promise<void> {
    await this.deps.table.mutate(id, (d) => {
      const rec = this.life.existing(d, id);
      if (isTerminal(rec.status)) return;
      const children = rec.children;
      this.life.finish(d, 'TERMINATED', output, undefined, [
        { eventId: -1, timestamp: toTimestamp(this.deps.clock.now()), executionTerminated: { input: sv(output), recurse: recursive } },
      ]);
      if (!recursive) return;
      d.effects.push(() => {
        for (const child of children) this.terminate(child, undefined, true).catch(() => undefined);
      });
    });
  }

  async suspend(id: string, reason?: string): Promise<void> {
    await this.deps.table.mutate(id, (d) => {
      const rec = this.life.existing(d, id);
      if (isTerminal(rec.status)) throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status} and cannot be suspended`);
      if (rec.status === 'SUSPENDED') return;
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(this.deps.clock.now()), executionSuspended: { input: sv(reason) } } });
      this.life.waiters.notifyAfter(d, id);
    });
  }

  async resume(id: string, reason?: string): Promise<void> {
    await this.deps.table.mutate(id, (d) => {
      const rec = this.life.existing(d, id);
      if (isTerminal(rec.status)) throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status} and cannot be resumed`);
      if (rec.status !== 'SUSPENDED') return;
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(this.deps.clock.now()), executionResumed: { input: sv(reason) } } });
      this.life.makeRunnable(d);
      this.life.waiters.notifyAfter(d, id);
    });
  }

  /**
   * Removes every key of a finished instance; with `recursive`, also of its finished
   * sub-orchestrations (and theirs), the default as in the reference runtime's HTTP and Dapr-API
   * purge. Returns how many instances were removed.
   */
  async purge(id: string, recursive = true): Promise<number> {
    const children = await this.deps.table.mutate(id, (d) => {
      const rec = this.life.existing(d, id);
      if (!isTerminal(rec.status)) {
        throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status}; only COMPLETED, FAILED or TERMINATED instances can be purged`);
      }
      d.emit({ rt: 'purged' });
      return rec.children;
    });
    this.deps.table.evict(id);
    let n = 1;
    if (recursive) for (const c of children) n += await this.purge(c, true).catch(() => 0);
    return n;
  }

  async get(id: string): Promise<InstanceRecord | undefined> {
    return this.deps.table.read(id);
  }

  /** Resolves with the state once `until` holds (or undefined when aborted). */
  waitFor(id: string, until: (r: InstanceState | undefined) => boolean, signal?: AbortSignal): Promise<InstanceState | undefined> {
    return this.life.waiters.wait(id, until, signal);
  }

  /** The stored history of an instance, oldest first (what has been shown to the orchestrator). */
  async history(id: string): Promise<HistoryEvent[]> {
    return (await this.finishedHistory(id, (rec) => rec)).history;
  }

  /**
   * Starts an instance again with its name, version and input: under the same id once it has
   * finished, or under a new id (then it may still run).
   */
  async restart(id: string, newId: boolean): Promise<string> {
    const rec = await this.deps.table.read(id);
    if (!rec) throw new WorkflowError('NOT_FOUND', `no workflow instance with id "${id}"`);
    if (!newId && !isTerminal(rec.status)) {
      throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status}; only a finished instance can be restarted under its own id`);
    }
    return this.start({ instanceId: newId ? undefined : id, name: rec.name, version: rec.version, input: rec.input });
  }

  /**
   * RerunWorkflowFromEvent: a new instance (`newId`, or a generated one) from the history of a
   * finished instance, cut before the activity or timer `eventId`. With `input`, that activity gets it.
   */
  async rerun(req: RerunRequest): Promise<string> {
    const { sourceId, eventId } = req;
    const source = await this.finishedHistory(sourceId, (rec) => {
      // INVALID as in the reference runtime ("not in a terminal state")
      if (!isTerminal(rec.status)) throw new WorkflowError('INVALID', `workflow instance "${sourceId}" is ${rec.status}, not in a terminal state; only a finished instance can be rerun`);
      return rec;
    });
    const id = req.newId || randomUUID();
    const executionId = randomUUID();
    // tracing on: the rerun's own orchestration span, linked to the source's
    const tracing = this.deps.tracing;
    const traced = tracing?.started(id, source.rec.name, req.trace, tracing.orchestrationContext(source.history));
    const notStarted = (e: unknown): never => {
      traced?.refused((e as Error).message);
      throw e;
    };
    let plan: ReturnType<typeof rerunStart>;
    try {
      plan = rerunStart(sourceId, source.history, eventId, id, executionId, traced?.fields);
    } catch (e) {
      return notStarted(e);
    }
    const { me, clock } = this.deps;
    const now = clock.now();
    await this.deps.table.mutate(id, (d) => {
      if (d.rec && !isTerminal(d.rec.status)) {
        throw new WorkflowError('CONFLICT', `workflow instance "${id}" already exists and is ${d.rec.status}; choose another id for the rerun`);
      }
      if (d.rec) this.life.cancelTimers(d);
      const acts: InstanceState['acts'] = {};
      for (const [taskId, a] of Object.entries(plan.acts)) acts[taskId] = { ...a, owner: me };
      const timers: InstanceState['timers'] = {};
      for (const [timerId, fireAt] of Object.entries(plan.timers)) timers[timerId] = { fireAt, owner: me };
      d.emit({
        rt: 'begin',
        state: {
          id,
          name: source.rec.name,
          version: source.rec.version,
          status: 'RUNNING',
          createdAt: now,
          // it starts from a history that ran
          startedAt: now,
          input: source.rec.input,
          executionId,
          // the kept history replays as it did, so the source's received history goes with it
          propagated: source.rec.propagated,
          acts,
          timers,
          children: plan.children.map((c) => c.instanceId),
          runDue: true,
          rerunInput: req.input && plan.fromActivity ? { taskId: eventId, input: req.input.value } : undefined,
        },
        history: plan.history,
      });
      const rec = d.rec as InstanceState;
      // what was pending at the cut is pending again, as after a restart
      this.life.dispatchOwnedActivities(d, rec, plan.history);
      for (const [timerId, fireAt] of Object.entries(plan.timers)) this.life.armTimer(d, { instanceId: id, executionId, timerId }, fireAt);
      for (const c of plan.children) {
        const parent: ParentRef = { instanceId: id, executionId, taskId: c.taskId, name: rec.name, version: rec.version };
        const propagated = this.life.propagatedAt(rec, plan.history, c.taskId, 'subOrchestrationInstanceCreated');
        d.effects.push(() => void this.ensureChild({ instanceId: c.instanceId, name: c.name, version: c.version, input: c.input, parent, propagated }));
      }
      this.life.makeRunnable(d);
      this.life.waiters.notifyAfter(d, id);
    }).then(() => traced?.stored(), notStarted);
    return id;
  }

  /** Starts a sub-orchestration; a start that fails fails the child's task in the parent. */
  async startChild(child: ChildStart): Promise<void> {
    try {
      await this.start(child);
    } catch (e) {
      const failure: FailureDetails = { errorType: 'SubOrchestrationStartError', errorMessage: (e as Error).message };
      await this.life.notifyParent(child.parent, child.instanceId, { status: 'FAILED', failure });
    }
  }

  /** A child whose start may have been lost: started if missing, its result sent again if finished. */
  async ensureChild(child: ChildStart): Promise<void> {
    const rec = await this.deps.table.read(child.instanceId);
    if (!rec) return this.startChild(child);
    if (isTerminal(rec.status)) await this.life.notifyParent(child.parent, child.instanceId, outcomeOf(rec));
  }

  /** The state `check` accepts and the history of an instance; a finished one leaves the cache after. */
  private async finishedHistory(id: string, check: (rec: InstanceState) => InstanceState): Promise<{ rec: InstanceState; history: HistoryEvent[] }> {
    try {
      const out = await this.deps.table.mutate(id, (d) => ({ rec: check(this.life.existing(d, id)), history: d.history.filter((e) => !e.orchestratorCompleted) }));
      if (isTerminal(out.rec.status)) this.deps.table.evict(id);
      return out;
    } catch (e) {
      this.deps.table.evict(id);
      throw e;
    }
  }
}

function outcomeOf(rec: InstanceState): ChildOutcome {
  return { status: rec.status, output: rec.output, failure: rec.failure };
}
