/**
 * The workflow engine: Durable Task semantics on top of the instance table.
 *
 * An instance moves forward in *runs*: the orchestrator (in a worker) gets its past history
 * plus the new events (OrchestratorStarted first, carrying the deterministic clock, then what
 * waited in the inbox) and answers with actions. Applying the answer appends one history batch
 * and turns actions into activities, timers, sub-orchestrations and events. Activity results,
 * timers and raised events land in the inbox and make the instance runnable again.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { WorkflowError } from './errors.ts';
import type { Draft, InstanceTable } from './instances.ts';
import {
  OrchestrationStatus,
  STALLED_STATUS,
  STATUS_BY_NUMBER,
  StalledReason,
  fromTimestamp,
  sv,
  toTimestamp,
  type ActivityResponse,
  type FailureDetails,
  type HistoryEvent,
  type OrchestrationStateMsg,
  type OrchestratorAction,
  type OrchestratorRequest,
  type OrchestratorResponse,
  type PropagatedHistory,
  type RuntimeStatus,
  type StallReason,
} from './proto.ts';
import { patchMismatch, propagate, propagateFrom, scopeOf, versionOf } from './propagation.ts';
import { isTerminal, shownStatus, type InstanceRecord, type InstanceState, type ParentRef } from './record.ts';
import { rerunStart } from './rerun.ts';
import type { TimerRef, Timers } from './timers.ts';
import type { ActivityTask, OrchestratorRun, Workers } from './workers.ts';

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
}

/** A lease older than this, held by another replica, is taken over when work arrives. */
const STALE_LEASE_MS = 60_000;
/** Delay before work whose result could not be stored is dispatched again. */
const RETRY_MS = 1000;
/**
 * A stalled run (no connected worker has the workflow's version) is tried again when a worker
 * connects, and at this interval in case the one that has it was already connected.
 */
const STALL_RETRY_MS = 30_000;

type Waiter = { until: (r: InstanceState | undefined) => boolean; resolve: (r: InstanceState | undefined) => void };

export class Engine {
  readonly table: InstanceTable;
  readonly workers: Workers;
  private readonly timers: Timers;
  private readonly log: Logger;
  private readonly me: string;
  /** Names this app in the chunks of propagated history. */
  private readonly appId: string;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private pollTimer?: NodeJS.Timeout;
  /** Stalled instances of this replica and the timer that tries each again. */
  private readonly stalled = new Map<string, NodeJS.Timeout>();

  constructor(table: InstanceTable, workers: Workers, timers: Timers, log: Logger, appId = '') {
    this.table = table;
    this.appId = appId;
    this.workers = workers;
    this.timers = timers;
    this.log = log;
    this.me = table.replicaId;
    workers.attach({ prepareRun: (id) => this.prepareRun(id), activityWanted: (t) => this.activityWanted(t), workerConnected: () => this.retryStalled() });
    timers.onFire((t) => this.timerFired(t));
    // a shared store can change under us (another replica finishes an instance): waiters poll
    if (table.shared) {
      this.pollTimer = setInterval(() => void this.pollWaiters(), 1000);
      this.pollTimer.unref();
    }
  }

  /** Set once the sidecar shuts down: waits end with UNAVAILABLE instead of an answer. */
  closed = false;

  close(): void {
    this.closed = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    for (const t of this.stalled.values()) clearTimeout(t);
    this.stalled.clear();
    for (const set of this.waiters.values()) for (const w of set) w.resolve(undefined);
    this.waiters.clear();
    this.timers.close();
    this.table.close();
  }

  // ------------------------------------------------------------------ client operations

  /** Set when new instances must not start (e.g. no durable store in a pod); the reason is the error. */
  refuseStarts: string | undefined;

  async start(req: StartRequest): Promise<string> {
    if (this.refuseStarts) throw new WorkflowError('PRECONDITION', this.refuseStarts);
    const id = req.instanceId || randomUUID();
    const now = Date.now();
    await this.table.mutate(id, (d) => {
      if (d.rec && !isTerminal(d.rec.status)) {
        throw new WorkflowError('CONFLICT', `workflow instance "${id}" already exists and is ${d.rec.status}; terminate or wait for it before starting it again`);
      }
      const executionId = randomUUID();
      const delayed = req.scheduledStart !== undefined && req.scheduledStart > now;
      const started: HistoryEvent = {
        eventId: -1,
        timestamp: toTimestamp(now),
        executionStarted: {
          name: req.name,
          version: sv(req.version),
          input: sv(req.input),
          orchestrationInstance: { instanceId: id, executionId: { value: executionId } },
          parentInstance: parentInfo(req.parent),
          scheduledStartTimestamp: delayed ? toTimestamp(req.scheduledStart as number) : undefined,
        },
      };
      // a finished instance with the same id is replaced: its old history goes (a new journal begins)
      if (d.rec) this.cancelTimers(d);
      const fireAt = req.scheduledStart as number;
      d.emit(
        {
          rt: 'begin',
          state: { id, status: 'PENDING', createdAt: now, propagated: req.propagated, ...(delayed ? { scheduledStart: fireAt, timers: { start: { fireAt, owner: this.me } } } : {}) },
        },
        { rt: 'arrived', event: started },
      );
      if (delayed) {
        const ref = { instanceId: id, executionId, timerId: 'start' };
        d.effects.push(() => void this.timers.arm(ref, fireAt).catch((e) => this.log.error({ err: e }, 'arming a delayed start failed')));
      } else this.makeRunnable(d);
      this.notifyAfter(d, id);
    });
    return id;
  }

  async raiseEvent(id: string, name: string, input: string | undefined): Promise<void> {
    const now = Date.now();
    await this.table.mutate(id, (d) => {
      const rec = this.existing(d, id);
      if (isTerminal(rec.status)) return; // nothing listens any more; accepted like the ecosystem does
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(now), eventRaised: { name, input: sv(input) } } });
      this.makeRunnable(d);
    });
  }

  /**
   * Terminates the instance; with `recursive`, its running sub-orchestrations too (and theirs).
   * HTTP and the Dapr runtime API always terminate recursively (contract; the default);
   * TaskHubSidecarService follows the request's flag.
   */
  async terminate(id: string, output: string | undefined, recursive = true): Promise<void> {
    await this.table.mutate(id, (d) => {
      const rec = this.existing(d, id);
      if (isTerminal(rec.status)) return;
      const children = rec.children;
      this.finish(d, 'TERMINATED', output, undefined, [
        { eventId: -1, timestamp: toTimestamp(Date.now()), executionTerminated: { input: sv(output), recurse: recursive } },
      ]);
      if (!recursive) return;
      d.effects.push(() => {
        for (const child of children) this.terminate(child, undefined, true).catch(() => undefined);
      });
    });
  }

  async suspend(id: string, reason?: string): Promise<void> {
    await this.table.mutate(id, (d) => {
      const rec = this.existing(d, id);
      if (isTerminal(rec.status)) throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status} and cannot be suspended`);
      if (rec.status === 'SUSPENDED') return;
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(Date.now()), executionSuspended: { input: sv(reason) } } });
      this.notifyAfter(d, id);
    });
  }

  async resume(id: string, reason?: string): Promise<void> {
    await this.table.mutate(id, (d) => {
      const rec = this.existing(d, id);
      if (isTerminal(rec.status)) throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status} and cannot be resumed`);
      if (rec.status !== 'SUSPENDED') return;
      d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(Date.now()), executionResumed: { input: sv(reason) } } });
      this.makeRunnable(d);
      this.notifyAfter(d, id);
    });
  }

  /**
   * Removes every key of a finished instance; with `recursive`, also of its finished
   * sub-orchestrations (and theirs), the default as in the reference runtime's HTTP and Dapr-API
   * purge. Returns how many instances were removed.
   */
  async purge(id: string, recursive = true): Promise<number> {
    const children = await this.table.mutate(id, (d) => {
      const rec = this.existing(d, id);
      if (!isTerminal(rec.status)) {
        throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status}; only COMPLETED, FAILED or TERMINATED instances can be purged`);
      }
      d.emit({ rt: 'purged' });
      return rec.children;
    });
    this.table.evict(id);
    let n = 1;
    if (recursive) for (const c of children) n += await this.purge(c, true).catch(() => 0);
    return n;
  }

  /** The stored history of an instance, oldest first (what has been shown to the orchestrator). */
  async history(id: string): Promise<HistoryEvent[]> {
    try {
      const out = await this.table.mutate(id, (d) => {
        const rec = this.existing(d, id);
        return { finished: isTerminal(rec.status), events: d.history.filter((e) => !e.orchestratorCompleted) };
      });
      if (out.finished) this.table.evict(id);
      return out.events;
    } catch (e) {
      this.table.evict(id);
      throw e;
    }
  }

  /**
   * Starts an instance again with its name, version and input: under the same id once it has
   * finished, or under a new id (then it may still run).
   */
  async restart(id: string, newId: boolean): Promise<string> {
    const rec = await this.table.read(id);
    if (!rec) throw new WorkflowError('NOT_FOUND', `no workflow instance with id "${id}"`);
    if (!newId && !isTerminal(rec.status)) {
      throw new WorkflowError('PRECONDITION', `workflow instance "${id}" is ${rec.status}; only a finished instance can be restarted under its own id`);
    }
    return this.start({ instanceId: newId ? undefined : id, name: rec.name, version: rec.version, input: rec.input });
  }

  /**
   * RerunWorkflowFromEvent: a new instance (`newId`, or a generated one) from the history of a
   * finished instance, cut before the activity `eventId`. With `input`, that activity gets it.
   */
  async rerun(req: { sourceId: string; eventId: number; newId?: string; input?: { value: string | undefined } }): Promise<string> {
    const { sourceId, eventId } = req;
    const source = await this.table
      .mutate(sourceId, (d) => {
        const rec = this.existing(d, sourceId);
        // INVALID as in the reference runtime ("not in a terminal state")
        if (!isTerminal(rec.status)) throw new WorkflowError('INVALID', `workflow instance "${sourceId}" is ${rec.status}, not in a terminal state; only a finished instance can be rerun`);
        return { rec, history: d.history.filter((e) => !e.orchestratorCompleted) };
      })
      .finally(() => this.table.evict(sourceId));
    const id = req.newId || randomUUID();
    const executionId = randomUUID();
    const plan = rerunStart(sourceId, source.history, eventId, id, executionId);
    const now = Date.now();
    await this.table.mutate(id, (d) => {
      if (d.rec && !isTerminal(d.rec.status)) {
        throw new WorkflowError('CONFLICT', `workflow instance "${id}" already exists and is ${d.rec.status}; choose another id for the rerun`);
      }
      if (d.rec) this.cancelTimers(d);
      const acts: InstanceState['acts'] = {};
      for (const [taskId, a] of Object.entries(plan.acts)) acts[taskId] = { ...a, owner: this.me };
      const timers: InstanceState['timers'] = {};
      for (const [timerId, fireAt] of Object.entries(plan.timers)) timers[timerId] = { fireAt, owner: this.me };
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
      for (const [taskId, a] of Object.entries(plan.acts)) {
        const propagatedHistory = this.propagatedAt(rec, plan.history, Number(taskId), 'taskScheduled');
        const task = { instanceId: id, executionId, taskId: Number(taskId), name: a.name, input: a.input, propagatedHistory };
        d.effects.push(() => this.workers.enqueueActivity(task));
      }
      for (const [timerId, fireAt] of Object.entries(plan.timers)) {
        const ref = { instanceId: id, executionId, timerId };
        d.effects.push(() => void this.timers.arm(ref, fireAt).catch((e) => this.log.error({ err: e }, 'arming a workflow timer failed')));
      }
      for (const c of plan.children) {
        const parent: ParentRef = { instanceId: id, executionId, taskId: c.taskId, name: rec.name, version: rec.version };
        const propagated = this.propagatedAt(rec, plan.history, c.taskId, 'subOrchestrationInstanceCreated');
        d.effects.push(() => void this.ensureChild({ instanceId: c.instanceId, name: c.name, version: c.version, input: c.input, parent, propagated }));
      }
      this.makeRunnable(d);
      this.notifyAfter(d, id);
    });
    return id;
  }

  async get(id: string): Promise<InstanceRecord | undefined> {
    return this.table.read(id);
  }

  /** Resolves with the record once `until` holds (or undefined when aborted). */
  async waitFor(id: string, until: (r: InstanceState | undefined) => boolean, signal?: AbortSignal): Promise<InstanceState | undefined> {
    return new Promise((resolve) => {
      let set = this.waiters.get(id);
      if (!set) this.waiters.set(id, (set = new Set()));
      const mine = set;
      const w: Waiter = {
        until,
        resolve: (r) => {
          if (!mine.delete(w)) return;
          if (mine.size === 0 && this.waiters.get(id) === mine) this.waiters.delete(id);
          resolve(r);
        },
      };
      set.add(w);
      signal?.addEventListener('abort', () => w.resolve(undefined), { once: true });
      // registered first, read second: a change committed in between is not missed
      this.table.read(id).then((r) => {
        if (until(r)) w.resolve(r);
      }, () => w.resolve(undefined));
    });
  }

  // ------------------------------------------------------------------ worker answers

  async completeOrchestrator(res: OrchestratorResponse, peer: string): Promise<void> {
    const id = res.instanceId;
    const run = this.workers.answerRun(id, peer);
    if (!run) {
      this.log.debug({ instanceId: id }, 'orchestrator answer for a run that is not in flight here; ignored');
      return;
    }
    try {
      await this.table.mutate(id, (d) => this.applyRun(d, run, res));
      this.workers.finishRun(id);
    } catch (e) {
      // not stored: the run is asked for again, a little later (its answer is deterministic)
      this.workers.finishRun(id);
      setTimeout(() => this.workers.enqueueRun(id), RETRY_MS).unref();
      throw e;
    }
  }

  async completeActivity(res: ActivityResponse, peer: string): Promise<void> {
    const id = res.instanceId;
    const task = this.workers.takeActivity(id, res.taskId, peer);
    const now = Date.now();
    await this.table.mutate(id, (d) => {
      const rec = d.rec;
      if (!rec || isTerminal(rec.status)) return;
      if (task && task.executionId !== rec.executionId) return;
      const key = String(res.taskId);
      if (!rec.acts[key]) return; // answered already (a re-dispatched copy) or from an old execution
      d.emit({
        rt: 'arrived',
        event: res.failureDetails
          ? { eventId: -1, timestamp: toTimestamp(now), taskFailed: { taskScheduledId: res.taskId, failureDetails: res.failureDetails } }
          : { eventId: -1, timestamp: toTimestamp(now), taskCompleted: { taskScheduledId: res.taskId, result: res.result ?? undefined } },
      });
      this.makeRunnable(d);
    }).catch((e) => {
      // not stored: the activity runs again rather than its result being lost
      if (task) setTimeout(() => this.workers.enqueueActivity(task), RETRY_MS).unref();
      throw e;
    });
  }

  private async timerFired(t: TimerRef): Promise<void> {
    const now = Date.now();
    await this.table.mutate(t.instanceId, (d) => {
      const rec = d.rec;
      if (!rec || isTerminal(rec.status) || rec.executionId !== t.executionId) return;
      const timer = rec.timers[t.timerId];
      if (!timer) return;
      if (t.timerId !== 'start') {
        d.emit({ rt: 'arrived', event: { eventId: -1, timestamp: toTimestamp(now), timerFired: { fireAt: toTimestamp(timer.fireAt), timerId: Number(t.timerId) } } });
      } else d.emit({ rt: 'startDue', at: now });
      this.makeRunnable(d);
    });
  }

  // ------------------------------------------------------------------ runs

  /** Called by Workers when a stream has room: the run to send, built from the cached record. */
  private async prepareRun(id: string): Promise<{ request: OrchestratorRequest; run: OrchestratorRun } | undefined> {
    const c = this.table.get(id);
    const history = await this.table.history(c);
    const rec = c.rec;
    if (!rec || isTerminal(rec.status) || rec.status === 'SUSPENDED' || rec.timers.start) return undefined;
    if (rec.lease?.owner !== this.me || (rec.inbox.length === 0 && !rec.runDue)) return undefined;
    const started: HistoryEvent = { eventId: -1, timestamp: toTimestamp(Date.now()), orchestratorStarted: {} };
    const run: OrchestratorRun = { executionId: rec.executionId, taken: rec.inbox.length, started };
    return {
      run,
      // OrchestratorCompleted markers (stored by older versions) are not sent: the reference
      // sidecar sends none, and the SDKs log every one as an unknown event on each replay
      request: {
        instanceId: id,
        executionId: { value: rec.executionId },
        // nor ExecutionStalled markers: no SDK acts on them, and older ones log each as unknown
        pastEvents: history.filter((e) => !e.orchestratorCompleted && !e.executionStalled),
        newEvents: [started, ...rec.inbox],
        propagatedHistory: rec.propagated,
      },
    };
  }

  /** An activity still waits for its result (unknown when the instance is not cached: send it). */
  private activityWanted(t: ActivityTask): boolean {
    const c = this.table.peek(t.instanceId);
    if (!c?.loaded) return true;
    return !!c.rec && c.rec.executionId === t.executionId && !!c.rec.acts[String(t.taskId)];
  }

  private applyRun(d: Draft, run: OrchestratorRun, res: OrchestratorResponse): void {
    const rec = d.rec;
    if (!rec || isTerminal(rec.status) || rec.executionId !== run.executionId || rec.lease?.owner !== this.me || rec.inbox.length < run.taken) {
      // an answer that no longer fits: what waits in the inbox gets a fresh run
      this.makeRunnable(d);
      return;
    }
    const id = rec.id;
    const now = Date.now();
    // the worker does not have the version this instance runs: nothing of the run is kept, and
    // it is tried again on another worker (as the reference runtime's stalled state)
    if ((res.actions ?? []).some((a) => a.workflowVersionNotAvailable)) {
      // the version is the name recorded by the runs so far, else the one asked for at start
      const named = d.history.findLast((e) => e.orchestratorStarted?.version?.name)?.orchestratorStarted?.version?.name ?? rec.version;
      const which = named ? `version ${JSON.stringify(named)}` : 'the version';
      this.stall(d, now, 'VERSION_NOT_AVAILABLE', `no worker that answered has ${which} of workflow ${JSON.stringify(rec.name)} this instance runs`);
      return;
    }
    // nor does one whose patches contradict what the instance already did
    const mismatch = patchMismatch(d.history, res.version);
    if (mismatch) {
      this.stall(d, now, 'PATCH_MISMATCH', mismatch);
      return;
    }
    const ts = toTimestamp(now);
    // the patches and version the run answered with stay in its OrchestratorStarted: every
    // replay sees them again (the SDK's isPatched depends on them), as in the reference runtime
    const version = versionOf(res.version);
    const started = version ? { ...run.started, orchestratorStarted: { version } } : run.started;
    d.emit({ rt: 'run', started, taken: run.taken, at: now, customStatus: res.customStatus ? res.customStatus.value : undefined });

    // an action the engine cannot carry out fails the workflow now, rather than leaving it
    // waiting forever for a result that will never come
    const unsupported = (res.actions ?? []).find((a) => !isSupported(a) || this.otherApp(a) !== undefined);
    if (unsupported) {
      const other = this.otherApp(unsupported);
      const what = other === undefined ? unsupportedName(unsupported) : `${unsupportedName(unsupported)} on app "${other}" (a cross-app workflow call; run it in this app)`;
      this.finish(d, 'FAILED', undefined, { errorType: 'UnsupportedOrchestratorAction', errorMessage: `the workflow asked for ${what} (action id ${unsupported.id}), which this sidecar does not support` }, []);
      return;
    }

    for (const a of res.actions ?? []) {
      if (a.scheduleTask) {
        let t = a.scheduleTask;
        // a rerun's new input goes to the activity it starts from (the event says so, which ends rerunInput)
        if (rec.rerunInput?.taskId === a.id) t = { ...t, input: sv(rec.rerunInput.input) };
        const scope = scopeOf(t.historyPropagationScope);
        d.emit({ eventId: a.id, timestamp: ts, taskScheduled: { name: t.name, version: t.version ?? undefined, input: t.input ?? undefined, historyPropagationScope: scope || undefined } });
        const propagatedHistory = scope ? this.propagated(rec, scope, d.history) : undefined;
        const task = { instanceId: id, executionId: rec.executionId, taskId: a.id, name: t.name, input: t.input?.value, propagatedHistory };
        d.effects.push(() => this.workers.enqueueActivity(task));
      } else if (a.createTimer) {
        const fireAt = fromTimestamp(a.createTimer.fireAt) ?? now;
        d.emit({ eventId: a.id, timestamp: ts, timerCreated: { fireAt: a.createTimer.fireAt ?? toTimestamp(fireAt) } });
        const ref = { instanceId: id, executionId: rec.executionId, timerId: String(a.id) };
        d.effects.push(() => void this.timers.arm(ref, fireAt).catch((e) => this.log.error({ err: e, instanceId: id }, 'arming a workflow timer failed')));
      } else if (a.createSubOrchestration) {
        const s = a.createSubOrchestration;
        const childId = s.instanceId || `${id}:${a.id.toString(16).padStart(4, '0')}`;
        const scope = scopeOf(s.historyPropagationScope);
        d.emit({
          eventId: a.id,
          timestamp: ts,
          subOrchestrationInstanceCreated: { instanceId: childId, name: s.name, version: s.version ?? undefined, input: s.input ?? undefined, historyPropagationScope: scope || undefined },
        });
        const parent: ParentRef = { instanceId: id, executionId: rec.executionId, taskId: a.id, name: rec.name, version: rec.version };
        const propagated = scope ? this.propagated(rec, scope, d.history) : undefined;
        const child = { instanceId: childId, name: s.name, version: s.version?.value, input: s.input?.value, parent, propagated };
        d.effects.push(() => void this.startChild(child));
      } else if (a.sendEvent) {
        const e = a.sendEvent;
        const target = e.instance?.instanceId ?? '';
        d.emit({ eventId: a.id, timestamp: ts, eventSent: { instanceId: target, name: e.name, input: e.data ?? undefined } });
        d.effects.push(() => void this.raiseEvent(target, e.name, e.data?.value).catch((err) => this.log.warn({ err, target }, 'workflow event to another instance was not delivered')));
      } else if (a.terminateOrchestration) {
        const t = a.terminateOrchestration;
        // the action's reason becomes the terminated instance's output, as a client terminate's output does
        d.effects.push(() => void this.terminate(t.instanceId, t.reason?.value, t.recurse ?? false).catch(() => undefined));
      } else if (a.completeOrchestration) {
        if (this.complete(d, a)) break;
      }
    }
    const after = d.rec as InstanceState;
    if (isTerminal(after.status)) return;
    if (after.status === 'SUSPENDED' || after.inbox.length === 0) d.emit({ rt: 'released' });
    else this.makeRunnable(d);
    this.notifyAfter(d, id);
  }

  /**
   * A run that cannot be applied (see StallReason): nothing of it is kept, the inbox stays as it
   * was, the lease stays here, and the instance waits (`stalled` saying why, with an
   * ExecutionStalled event in its history, as the reference runtime) until a worker connects or
   * STALL_RETRY_MS passes. During a rollout that is the new replica's worker.
   */
  private stall(d: Draft, now: number, reason: StallReason, description: string): void {
    const rec = d.rec as InstanceState;
    if (rec.stalled?.reason !== reason) {
      d.emit({ eventId: -1, timestamp: toTimestamp(now), executionStalled: { reason: StalledReason[reason], description } });
      this.log.warn({ instanceId: rec.id, workflow: rec.name, version: rec.version, reason }, `workflow stalled: ${description}; it runs again when a worker connects`);
      this.notifyAfter(d, rec.id);
    }
    const id = rec.id;
    d.effects.push(() => {
      if (this.closed || this.stalled.has(id)) return;
      const t = setTimeout(() => this.unstall(id), STALL_RETRY_MS);
      t.unref();
      this.stalled.set(id, t);
    });
  }

  /** A worker connected: every stalled instance of this replica is run again. */
  private retryStalled(): void {
    for (const id of [...this.stalled.keys()]) this.unstall(id);
  }

  private unstall(id: string): void {
    clearTimeout(this.stalled.get(id));
    this.stalled.delete(id);
    if (this.closed) return;
    this.table.mutate(id, (d) => this.makeRunnable(d)).catch((e) => this.log.error({ err: e, instanceId: id }, 'could not run a stalled workflow again'));
  }

  /**
   * The other app an activity or child workflow is addressed to (the SDKs' `app_id`), if any.
   * rt has no cross-app workflows; running this app's namesake instead would do the wrong work.
   */
  private otherApp(a: OrchestratorAction): string | undefined {
    const target = a.router?.targetAppID;
    return target && target !== this.appId && (a.scheduleTask || a.createSubOrchestration) ? target : undefined;
  }

  /** CompleteOrchestrationAction; returns true when the run's remaining actions are moot. */
  private complete(d: Draft, a: OrchestratorAction): boolean {
    const c = a.completeOrchestration ?? {};
    const status = STATUS_BY_NUMBER[c.orchestrationStatus ?? 0] ?? 'COMPLETED';
    if (status === 'CONTINUED_AS_NEW') {
      this.continueAsNew(d, c.result?.value, c.carryoverEvents ?? [], c.newVersion?.value);
      return true;
    }
    if (!isTerminal(status)) return false;
    let failure = c.failureDetails ?? undefined;
    if (status === 'FAILED' && !failure) failure = { errorType: 'OrchestratorError', errorMessage: c.result?.value ?? c.details?.value ?? 'the orchestrator failed' };
    this.finish(d, status, status === 'FAILED' ? undefined : c.result?.value, failure, []);
    return true;
  }

  private continueAsNew(d: Draft, input: string | undefined, carryover: HistoryEvent[], newVersion: string | undefined): void {
    const rec = d.rec as InstanceState;
    const now = Date.now();
    this.cancelTimers(d);
    const executionId = randomUUID();
    // events that arrived during the run and are meant for the workflow (not old task results) carry over
    const kept = rec.inbox.filter((e) => e.eventRaised || e.executionSuspended || e.executionResumed);
    // a workflow that received history hands the next execution this one's, with the scope it got
    const propagated = rec.propagated ? this.propagated(rec, rec.propagated.scope, d.history) : undefined;
    const started: HistoryEvent = {
      eventId: -1,
      timestamp: toTimestamp(now),
      executionStarted: {
        name: rec.name,
        version: sv(newVersion ?? rec.version),
        input: sv(input),
        orchestrationInstance: { instanceId: rec.id, executionId: { value: executionId } },
        parentInstance: parentInfo(rec.parent),
      },
    };
    const carried = carryover.map((e) => ({ ...e, eventId: -1, eventType: undefined, timestamp: e.timestamp ?? toTimestamp(now) }));
    // a new journal: what the instance keeps across executions, then the new execution's inbox
    // (a kept suspend marker leaves it SUSPENDED)
    d.emit(
      {
        rt: 'begin',
        state: { id: rec.id, status: 'RUNNING', createdAt: rec.createdAt, startedAt: rec.startedAt, customStatus: rec.customStatus, children: rec.children, propagated, lease: rec.lease },
      },
      ...[started, ...carried, ...kept].map((event) => ({ rt: 'arrived' as const, event })),
    );
    this.makeRunnable(d);
    this.notifyAfter(d, rec.id);
  }

  /** Moves the instance to a final status and tells its parent and waiters. */
  private finish(d: Draft, status: RuntimeStatus, output: string | undefined, failure: FailureDetails | undefined, before: HistoryEvent[]): void {
    const rec = d.rec as InstanceState;
    this.cancelTimers(d);
    d.emit(...before, {
      eventId: -1,
      timestamp: toTimestamp(Date.now()),
      executionCompleted: { orchestrationStatus: OrchestrationStatus[status], result: sv(output), failureDetails: failure },
    });
    const id = rec.id;
    const parent = rec.parent;
    const snapshot = { status, output, failure };
    d.effects.push(() => {
      this.workers.dropRun(id);
      if (parent) void this.notifyParent(parent, id, snapshot);
      this.table.evict(id);
    });
    this.notifyAfter(d, id);
  }

  private async notifyParent(parent: ParentRef, childId: string, child: { status: RuntimeStatus; output?: string; failure?: FailureDetails }): Promise<void> {
    const now = Date.now();
    await this.table
      .mutate(parent.instanceId, (d) => {
        const rec = d.rec;
        if (!rec || isTerminal(rec.status) || (parent.executionId && rec.executionId !== parent.executionId)) return;
        d.emit({
          rt: 'arrived',
          event:
            child.status === 'COMPLETED'
              ? { eventId: -1, timestamp: toTimestamp(now), subOrchestrationInstanceCompleted: { taskScheduledId: parent.taskId, result: sv(child.output) } }
              : {
                  eventId: -1,
                  timestamp: toTimestamp(now),
                  subOrchestrationInstanceFailed: {
                    taskScheduledId: parent.taskId,
                    failureDetails: child.failure ?? { errorType: 'SubOrchestrationTerminated', errorMessage: `sub-orchestration ${childId} ended ${child.status}` },
                  },
                },
        });
        this.makeRunnable(d);
      })
      .catch((e) => this.log.error({ err: e, parent: parent.instanceId }, 'telling the parent workflow about a finished sub-orchestration failed'));
  }

  private async startChild(child: StartRequest & { instanceId: string; parent: ParentRef }): Promise<void> {
    try {
      await this.start(child);
    } catch (e) {
      const failure: FailureDetails = { errorType: 'SubOrchestrationStartError', errorMessage: (e as Error).message };
      await this.notifyParent(child.parent, child.instanceId, { status: 'FAILED', failure });
    }
  }

  // ------------------------------------------------------------------ helpers

  /** Takes the lease when the instance has events to show and nobody else runs it. */
  private makeRunnable(d: Draft): void {
    const rec = d.rec;
    if (!rec || isTerminal(rec.status) || rec.status === 'SUSPENDED' || rec.timers.start || (rec.inbox.length === 0 && !rec.runDue)) return;
    const now = Date.now();
    if (rec.lease && rec.lease.owner !== this.me && now - rec.lease.at < STALE_LEASE_MS) return;
    if (rec.lease?.owner !== this.me) d.emit({ rt: 'lease', owner: this.me, at: now });
    const id = rec.id;
    d.effects.push(() => this.workers.enqueueRun(id));
  }

  /** The history an action with `scope` hands over: `own` is the instance's history up to its event. */
  private propagated(rec: InstanceState, scope: number, own: readonly HistoryEvent[]): PropagatedHistory | undefined {
    return propagate({ scope, own, received: rec.propagated, appId: this.appId, instanceId: rec.id });
  }

  /** The same, for an activity or child created by the stored event `eventId` (recovery, rerun). */
  private propagatedAt(rec: InstanceState, history: readonly HistoryEvent[], eventId: number, kind: 'taskScheduled' | 'subOrchestrationInstanceCreated'): PropagatedHistory | undefined {
    return propagateFrom(history, eventId, kind, { received: rec.propagated, appId: this.appId, instanceId: rec.id });
  }

  private existing(d: Draft, id: string): InstanceState {
    if (!d.rec) throw new WorkflowError('NOT_FOUND', `no workflow instance with id "${id}"`);
    return d.rec;
  }

  /** Cancels the durable timers of the instance's current execution, once the write succeeded. */
  private cancelTimers(d: Draft): void {
    const rec = d.rec as InstanceState;
    const refs: TimerRef[] = Object.keys(rec.timers).map((timerId) => ({ instanceId: rec.id, executionId: rec.executionId, timerId }));
    d.effects.push(() => {
      for (const ref of refs) void this.timers.cancel(ref);
    });
  }

  private notifyAfter(d: Draft, id: string): void {
    d.effects.push(() => {
      const set = this.waiters.get(id);
      if (!set) return;
      for (const w of [...set]) if (w.until(d.rec)) w.resolve(d.rec);
    });
  }

  private async pollWaiters(): Promise<void> {
    for (const [id, set] of this.waiters) {
      const rec = await this.table.read(id, true).catch(() => undefined);
      for (const w of [...set]) if (w.until(rec)) w.resolve(rec);
    }
  }

  // ------------------------------------------------------------------ recovery

  /** Picks up what this replica was doing before it stopped: runs, activities, timers. */
  async recover(): Promise<number> {
    const ids = await this.table.loadIndex();
    const resumed = await this.resumeAll(ids, new Set([this.me]));
    if (resumed) this.log.info({ instances: resumed }, 'workflow instances resumed after restart');
    return resumed;
  }

  /** Takes over the instances of a replica that died (see replicas.ts). */
  async adopt(deadReplica: string): Promise<number> {
    const ids = await this.table.loadIndex(deadReplica);
    const n = await this.resumeAll(ids, new Set([this.me, deadReplica]));
    await this.table.dropIndex(deadReplica);
    this.log.info({ replica: deadReplica, instances: n }, 'adopted the workflow instances of a dead replica');
    return n;
  }

  /** Re-dispatches what `owners` had pending on each instance, now owned by this replica. */
  private async resumeAll(ids: string[], owners: Set<string>): Promise<number> {
    let resumed = 0;
    await Promise.all(
      ids.map((id) =>
        this.table
          .mutate(id, (d) => {
            const rec = d.rec;
            // a finished or purged one leaves the list (instances.ts)
            if (!rec || isTerminal(rec.status)) return;
            resumed++;
            // what a dead replica owned is this replica's now (the instance joins its list)
            const from = [...owners].filter((o) => o !== this.me);
            if (from.length) d.emit({ rt: 'adopted', from, by: this.me, at: Date.now() });
            const now = d.rec as InstanceState;
            for (const [taskId, a] of Object.entries(now.acts)) {
              if (a.owner !== this.me) continue;
              const propagatedHistory = this.propagatedAt(now, d.history, Number(taskId), 'taskScheduled');
              const task = { instanceId: id, executionId: now.executionId, taskId: Number(taskId), name: a.name, input: a.input, propagatedHistory };
              d.effects.push(() => this.workers.enqueueActivity(task));
            }
            for (const [timerId, t] of Object.entries(now.timers)) {
              if (t.owner !== this.me) continue;
              const ref = { instanceId: id, executionId: now.executionId, timerId };
              d.effects.push(() => void this.timers.arm(ref, t.fireAt).catch((e) => this.log.error({ err: e }, 're-arming a workflow timer failed')));
            }
            if (now.lease?.owner === this.me) d.effects.push(() => this.workers.enqueueRun(id));
            else this.makeRunnable(d);
            // a parent terminated just before a crash may not have reached this child
            if (rec.parent) {
              const parentId = rec.parent.instanceId;
              d.effects.push(() => void this.terminateIfParentTerminated(id, parentId));
            }
            // sub-orchestrations whose start may have been lost in the crash
            for (const e of d.history) {
              const s = e.subOrchestrationInstanceCreated;
              if (!s) continue;
              const answered = (h: HistoryEvent) => (h.subOrchestrationInstanceCompleted?.taskScheduledId ?? h.subOrchestrationInstanceFailed?.taskScheduledId) === e.eventId;
              if (d.history.some(answered) || rec.inbox.some(answered)) continue;
              const parent: ParentRef = { instanceId: id, executionId: rec.executionId, taskId: e.eventId, name: rec.name, version: rec.version };
              const propagated = this.propagatedAt(rec, d.history, e.eventId, 'subOrchestrationInstanceCreated');
              const child = { instanceId: s.instanceId, name: s.name, version: s.version?.value, input: s.input?.value, parent, propagated };
              d.effects.push(() => void this.ensureChild(child));
            }
          })
          .catch((e) => this.log.error({ err: e, instanceId: id }, 'resuming a workflow instance failed')),
      ),
    );
    return resumed;
  }

  private async terminateIfParentTerminated(id: string, parentId: string): Promise<void> {
    const parent = await this.table.read(parentId).catch(() => undefined);
    if (parent?.status === 'TERMINATED' && parent.terminatedRecursively) await this.terminate(id, undefined, true).catch(() => undefined);
  }

  private async ensureChild(child: StartRequest & { instanceId: string; parent: ParentRef }): Promise<void> {
    const rec = await this.table.read(child.instanceId);
    if (!rec) return this.startChild(child);
    if (isTerminal(rec.status)) await this.notifyParent(child.parent, child.instanceId, { status: rec.status, output: rec.output, failure: rec.failure });
  }
}

const SUPPORTED_ACTIONS = ['scheduleTask', 'createTimer', 'createSubOrchestration', 'sendEvent', 'terminateOrchestration', 'completeOrchestration'] as const;

function isSupported(a: OrchestratorAction): boolean {
  return SUPPORTED_ACTIONS.some((k) => !!a[k]);
}

/** What an unsupported action is, in words a workflow author recognises. */
function unsupportedName(a: OrchestratorAction): string {
  switch (a.orchestratorActionType) {
    case 'sendEntityMessage':
      return 'an entity operation (sendEntityMessage: entity signal, call or lock)';
    case 'createDetachedWorkflow':
      return 'a detached workflow (createDetachedWorkflow)';
    case 'scheduleTask':
      return `the activity "${a.scheduleTask?.name}"`;
    case 'createSubOrchestration':
      return `the child workflow "${a.createSubOrchestration?.name}"`;
    default:
      return a.orchestratorActionType ? `the action ${a.orchestratorActionType}` : 'an orchestrator action of a type unknown to this sidecar';
  }
}

/** ExecutionStartedEvent.parentInstance of a sub-orchestration. */
function parentInfo(parent: ParentRef | undefined): NonNullable<HistoryEvent['executionStarted']>['parentInstance'] {
  if (!parent) return undefined;
  return {
    taskScheduledId: parent.taskId,
    name: sv(parent.name),
    version: sv(parent.version),
    orchestrationInstance: { instanceId: parent.instanceId, executionId: sv(parent.executionId) },
  };
}

/** The OrchestrationState message of a record. */
export function toStateMessage(rec: InstanceState, withPayloads: boolean): OrchestrationStateMsg {
  return {
    instanceId: rec.id,
    name: rec.name,
    version: sv(rec.version),
    orchestrationStatus: shownStatus(rec) === 'STALLED' ? STALLED_STATUS : OrchestrationStatus[rec.status],
    scheduledStartTimestamp: rec.scheduledStart ? toTimestamp(rec.scheduledStart) : undefined,
    createdTimestamp: toTimestamp(rec.createdAt),
    lastUpdatedTimestamp: toTimestamp(rec.updatedAt),
    input: withPayloads ? sv(rec.input) : undefined,
    output: withPayloads ? sv(rec.output) : undefined,
    customStatus: withPayloads ? sv(rec.customStatus) : undefined,
    failureDetails: rec.failure,
    executionId: sv(rec.executionId),
    completedTimestamp: isTerminal(rec.status) ? toTimestamp(rec.updatedAt) : undefined,
    parentInstanceId: sv(rec.parent?.instanceId),
    startedAt: rec.status === 'PENDING' ? undefined : toTimestamp(rec.startedAt ?? rec.createdAt),
  };
}
