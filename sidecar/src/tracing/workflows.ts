/**
 * The workflow engine's spans, as the Durable Task framework makes them:
 * - a start is a short PRODUCER span `create_orchestration <name>` under the start call's context;
 *   its context is the ExecutionStartedEvent's `parentTraceContext`;
 * - the instance is a SERVER span `orchestration <name>` from its start to its end, child of that;
 *   its id is the event's `orchestrationSpanID`, so that activities and children scheduled later
 *   (another run, another replica) find their parent in the history;
 * - an activity is a CLIENT span `activity <name>` from its scheduling to its result, whose
 *   context goes to the worker as the ActivityRequest's `parentTraceContext` (the SDK's own span
 *   is then its child); TaskScheduled and SubOrchestrationInstanceCreated events carry the
 *   orchestration's context.
 * Open spans live in this process only: an instance that outlives the sidecar keeps its trace
 * (the ids are in its history) but the span that was open is ended at shutdown.
 */
import { formatTraceParent, parseTraceParent } from './context.ts';
import type { RtSpan } from './sdk.ts';
import type { CarriedContext, TracingService } from './service.ts';

/** The Durable Task protocol's TraceContext. */
export interface TraceContextMessage {
  traceParent: string;
  spanID?: string;
  traceState?: { value: string } | null;
}

interface StartedEvent {
  parentTraceContext?: TraceContextMessage | null;
  orchestrationSpanID?: { value: string } | null;
}

/** A start's spans until it is stored or refused (WorkflowTracing.started). */
export interface StartingOrchestration {
  fields: Required<StartedEvent>;
  stored(): void;
  refused(reason: string): void;
}

const message = (span: RtSpan): TraceContextMessage => ({ traceParent: formatTraceParent(span.context), spanID: span.context.spanId, traceState: span.traceState ? { value: span.traceState } : undefined });

export class WorkflowTracing {
  private readonly tracing: TracingService;
  private readonly orchestrations = new Map<string, RtSpan>();
  /** Open activity spans by instance, then task id: an instance's end finds its own at once. */
  private readonly activities = new Map<string, Map<number, RtSpan>>();

  constructor(tracing: TracingService) {
    this.tracing = tracing;
  }

  /**
   * A new instance: its spans, and (`fields`) what its ExecutionStartedEvent records of them.
   * `rerunOf`: the instance is a rerun of another, whose orchestration span both spans link to (the
   * rerun is a start of its own, under the rerun call's context). The orchestration span counts as
   * the instance's once the start is stored (`stored`); a start refused (the id is taken by a
   * running instance, whose own span stays) ends it as failed (`refused`).
   */
  started(instanceId: string, name: string, carried: CarriedContext | undefined, rerunOf?: TraceContextMessage): StartingOrchestration {
    const attrs = { 'rt.component': 'workflows', 'rt.workflow.name': name, 'rt.workflow.instance_id': instanceId };
    const links = rerunOf ? [rerunOf.traceParent] : undefined;
    const create = this.tracing.start(`create_orchestration ${name}`, 'producer', carried, { ...attrs, 'rt.operation': rerunOf ? 'workflow.rerun' : 'workflow.start' }, links);
    create.end();
    const parent = message(create);
    const span = this.tracing.start(`orchestration ${name}`, 'server', { traceparent: parent.traceParent, tracestate: parent.traceState?.value }, { ...attrs, 'rt.operation': 'workflow.orchestration' }, links);
    return {
      fields: { parentTraceContext: parent, orchestrationSpanID: { value: span.context.spanId } },
      stored: () => {
        this.orchestrations.get(instanceId)?.end('replaced by a new start of the same instance id');
        this.orchestrations.set(instanceId, span);
      },
      refused: (reason) => span.end(reason),
    };
  }

  /** The instance ended: its span, when this process started it, and its activities' still open. */
  finished(instanceId: string, status: string, failure?: string): void {
    const open = this.activities.get(instanceId);
    if (open) {
      this.activities.delete(instanceId);
      for (const act of open.values()) act.end(`the workflow instance ended (${status}) before the activity's result`);
    }
    const span = this.orchestrations.get(instanceId);
    if (!span) return;
    this.orchestrations.delete(instanceId);
    span.setAttributes({ 'rt.workflow.status': status });
    span.end(status === 'FAILED' ? (failure ?? 'FAILED') : undefined);
  }

  /** The orchestration's context from its history (the ExecutionStartedEvent), for what it schedules. */
  orchestrationContext(history: readonly { executionStarted?: StartedEvent }[]): TraceContextMessage | undefined {
    const started = history.find((e) => e.executionStarted)?.executionStarted;
    const parent = parseTraceParent(started?.parentTraceContext?.traceParent);
    const spanId = started?.orchestrationSpanID?.value;
    if (!parent || !spanId || !/^[0-9a-f]{16}$/.test(spanId)) return undefined;
    const traceParent = formatTraceParent({ ...parent, spanId });
    return { traceParent, spanID: spanId, traceState: started?.parentTraceContext?.traceState ?? undefined };
  }

  /** An activity scheduled under `parent`: its CLIENT span, whose context the worker gets. */
  activityScheduled(instanceId: string, taskId: number, name: string, parent: TraceContextMessage | undefined): TraceContextMessage {
    let open = this.activities.get(instanceId);
    if (!open) this.activities.set(instanceId, (open = new Map()));
    open.get(taskId)?.end('scheduled again');
    const span = this.tracing.start(`activity ${name}`, 'client', { traceparent: parent?.traceParent, tracestate: parent?.traceState?.value }, {
      'rt.component': 'workflows',
      'rt.operation': 'workflow.activity',
      'rt.workflow.activity': name,
      'rt.workflow.instance_id': instanceId,
      'rt.workflow.task_id': taskId,
    });
    open.set(taskId, span);
    return message(span);
  }

  /** An activity's result arrived (`failure`: it failed). */
  activityDone(instanceId: string, taskId: number, failure?: string): void {
    const open = this.activities.get(instanceId);
    const span = open?.get(taskId);
    if (!span) return;
    open!.delete(taskId);
    if (open!.size === 0) this.activities.delete(instanceId);
    span.end(failure);
  }

  /** Shutdown: spans still open end now, so that they are exported. */
  close(): void {
    for (const s of [...this.orchestrations.values(), ...[...this.activities.values()].flatMap((open) => [...open.values()])]) s.end('the sidecar stopped while it was open');
    this.orchestrations.clear();
    this.activities.clear();
  }
}
