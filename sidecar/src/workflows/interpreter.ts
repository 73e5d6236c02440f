/**
 * The action interpreter: applies a worker's answer to a run. The run's OrchestratorStarted and
 * the inbox events it was shown join the history; each action becomes its history event and
 * its effect (an activity queued, a timer armed, a child started, an event sent, an instance
 * terminated), and a completion ends the instance or starts its next execution
 * (continue-as-new). An answer that cannot be applied stalls the instance instead; an action the
 * engine cannot carry out fails it.
 */
import { randomUUID } from 'node:crypto';
import type { ClientApi } from './client.ts';
import type { EngineDeps } from './deps.ts';
import type { Draft } from './instances.ts';
import type { Lifecycle } from './lifecycle.ts';
import { parentInfo } from './messages.ts';
import { STATUS_BY_NUMBER, StalledReason, fromTimestamp, sv, toTimestamp, type HistoryEvent, type OrchestratorAction, type OrchestratorResponse, type StallReason } from './proto.ts';
import { patchMismatch, scopeOf, versionOf } from './propagation.ts';
import { isTerminal, type InstanceState, type ParentRef } from './record.ts';
import type { StallRetries } from './stalls.ts';
import type { OrchestratorRun } from './workers.ts';

export class ActionInterpreter {
  private readonly deps: EngineDeps;
  private readonly life: Lifecycle;
  private readonly client: ClientApi;
  private readonly stalls: StallRetries;

  constructor(deps: EngineDeps, life: Lifecycle, client: ClientApi, stalls: StallRetries) {
    this.deps = deps;
    this.life = life;
    this.client = client;
    this.stalls = stalls;
  }

  /** Applies the answer `res` to the run `run` of the instance in `d`. */
  apply(d: Draft, run: OrchestratorRun, res: OrchestratorResponse): void {
    const rec = d.rec;
    const { me, clock } = this.deps;
    if (!rec || isTerminal(rec.status) || rec.executionId !== run.executionId || rec.lease?.owner !== me || rec.inbox.length < run.taken) {
      // an answer that no longer fits: what waits in the inbox gets a fresh run
      this.life.makeRunnable(d);
      return;
    }
    const now = clock.now();
    const actions = res.actions ?? [];
    // the worker does not have the version this instance runs: nothing of the run is kept, and
    // it is tried again on another worker (as the reference runtime's stalled state)
    if (actions.some((a) => a.workflowVersionNotAvailable)) {
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
    // the patches and version the run answered with stay in its OrchestratorStarted: every
    // replay sees them again (the SDK's isPatched depends on them), as in the reference runtime
    const version = versionOf(res.version);
    const started = version ? { ...run.started, orchestratorStarted: { version } } : run.started;
    d.emit({ rt: 'run', started, taken: run.taken, at: now, customStatus: res.customStatus ? res.customStatus.value : undefined });

    // an action the engine cannot carry out fails the workflow now, rather than leaving it
    // waiting forever for a result that will never come
    const unsupported = actions.find((a) => !isSupported(a) || this.otherApp(a) !== undefined);
    if (unsupported) {
      const other = this.otherApp(unsupported);
      const what = other === undefined ? unsupportedName(unsupported) : `${unsupportedName(unsupported)} on app "${other}" (a cross-app workflow call; run it in this app)`;
      this.life.finish(d, 'FAILED', undefined, { errorType: 'UnsupportedOrchestratorAction', errorMessage: `the workflow asked for ${what} (action id ${unsupported.id}), which this sidecar does not support` }, []);
      return;
    }

    // what the actions read of the instance does not change while they are applied
    const { id, executionId, name } = rec;
    const ts = toTimestamp(now);
    // tracing on: what it schedules carries the orchestration's context (tracing/workflows.ts)
    const tracing = this.deps.tracing;
    const orch = tracing?.orchestrationContext(d.history);
    for (const a of actions) {
      if (a.scheduleTask) {
        let t = a.scheduleTask;
        // a rerun's new input goes to the activity it starts from (the event says so, which ends rerunInput)
        if (rec.rerunInput?.taskId === a.id) t = { ...t, input: sv(rec.rerunInput.input) };
        const scope = scopeOf(t.historyPropagationScope);
        d.emit({ eventId: a.id, timestamp: ts, taskScheduled: { name: t.name, version: t.version ?? undefined, input: t.input ?? undefined, parentTraceContext: orch, historyPropagationScope: scope || undefined } });
        const propagatedHistory = scope ? this.life.propagated(rec, scope, d.history) : undefined;
        const trace = tracing?.activityScheduled(id, a.id, t.name, orch);
        const task = { instanceId: id, executionId, taskId: a.id, name: t.name, input: t.input?.value, propagatedHistory, trace };
        d.effects.push(() => this.deps.workers.enqueueActivity(task));
      } else if (a.createTimer) {
        const fireAt = fromTimestamp(a.createTimer.fireAt) ?? now;
        d.emit({ eventId: a.id, timestamp: ts, timerCreated: { fireAt: a.createTimer.fireAt ?? toTimestamp(fireAt) } });
        this.life.armTimer(d, { instanceId: id, executionId, timerId: String(a.id) }, fireAt);
      } else if (a.createSubOrchestration) {
        const s = a.createSubOrchestration;
        const childId = s.instanceId || `${id}:${a.id.toString(16).padStart(4, '0')}`;
        const scope = scopeOf(s.historyPropagationScope);
        d.emit({
          eventId: a.id,
          timestamp: ts,
          subOrchestrationInstanceCreated: { instanceId: childId, name: s.name, version: s.version ?? undefined, input: s.input ?? undefined, parentTraceContext: orch, historyPropagationScope: scope || undefined },
        });
        const parent: ParentRef = { instanceId: id, executionId, taskId: a.id, name, version: rec.version };
        const propagated = scope ? this.life.propagated(rec, scope, d.history) : undefined;
        const child = { instanceId: childId, name: s.name, version: s.version?.value, input: s.input?.value, parent, propagated, trace: orch && { traceparent: orch.traceParent, tracestate: orch.traceState?.value } };
        d.effects.push(() => void this.client.startChild(child));
      } else if (a.sendEvent) {
        const e = a.sendEvent;
        const target = e.instance?.instanceId ?? '';
        d.emit({ eventId: a.id, timestamp: ts, eventSent: { instanceId: target, name: e.name, input: e.data ?? undefined } });
        d.effects.push(() => void this.client.raiseEvent(target, e.name, e.data?.value).catch((err) => this.deps.log.warn({ err, target }, 'workflow event to another instance was not delivered')));
      } else if (a.terminateOrchestration) {
        const t = a.terminateOrchestration;
        // the action's reason becomes the terminated instance's output, as a client terminate's output does
        d.effects.push(() => void this.client.terminate(t.instanceId, t.reason?.value, t.recurse ?? false).catch(() => undefined));
      } else if (a.completeOrchestration) {
        if (this.complete(d, a)) break;
      }
    }
    const after = d.rec as InstanceState;
    if (isTerminal(after.status)) return;
    if (after.status === 'SUSPENDED' || after.inbox.length === 0) d.emit({ rt: 'released' });
    else this.life.makeRunnable(d);
    this.life.waiters.notifyAfter(d, id);
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
      this.deps.log.warn({ instanceId: rec.id, workflow: rec.name, version: rec.version, reason }, `workflow stalled: ${description}; it runs again when a worker connects`);
      this.life.waiters.notifyAfter(d, rec.id);
    }
    const id = rec.id;
    d.effects.push(() => this.stalls.later(id));
  }

  /**
   * The other app an activity or child workflow is addressed to (the SDKs' `app_id`), if any.
   * rt has no cross-app workflows; running this app's namesake instead would do the wrong work.
   */
  private otherApp(a: OrchestratorAction): string | undefined {
    const target = a.router?.targetAppID;
    return target && target !== this.deps.appId && (a.scheduleTask || a.createSubOrchestration) ? target : undefined;
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
    this.life.finish(d, status, status === 'FAILED' ? undefined : c.result?.value, failure, []);
    return true;
  }

  private continueAsNew(d: Draft, input: string | undefined, carryover: HistoryEvent[], newVersion: string | undefined): void {
    const rec = d.rec as InstanceState;
    const now = this.deps.clock.now();
    this.life.cancelTimers(d);
    const executionId = randomUUID();
    // events that arrived during the run and are meant for the workflow (not old task results) carry over
    const kept = rec.inbox.filter((e) => e.eventRaised || e.executionSuspended || e.executionResumed);
    // a workflow that received history hands the next execution this one's, with the scope it got
    const propagated = rec.propagated ? this.life.propagated(rec, rec.propagated.scope, d.history) : undefined;
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
    this.life.makeRunnable(d);
    this.life.waiters.notifyAfter(d, rec.id);
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
