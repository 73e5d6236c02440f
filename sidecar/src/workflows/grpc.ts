/**
 * TaskHubSidecarService on the sidecar's gRPC port: the workflow SDKs' client calls and the
 * worker stream (GetWorkItems) with its two completion calls.
 */
import * as grpc from '@grpc/grpc-js';
import { GrpcServer } from '../grpc/server.ts';
import { isTerminal } from './record.ts';
import type { Engine } from './engine.ts';
import { toStateMessage } from './messages.ts';
import { WorkflowError } from './errors.ts';
import { fromTimestamp, sv, type ActivityResponse, type HistoryEvent, type OrchestratorResponse, type RuntimeStatus, type StringValue, type Timestamp, type WorkItem } from './proto.ts';
import { checkInstanceId } from './ids.ts';
import { listInstances, pageSizeOf, statusesOf, timeOf, type InstanceFilter } from './listing.ts';
import { metadataContext } from '../tracing/carried.ts';

/** Events per StreamInstanceHistory message. */
const HISTORY_CHUNK = 200;

type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => void;

interface PurgeFilter {
  createdTimeFrom?: Timestamp;
  createdTimeTo?: Timestamp;
  runtimeStatus?: number[];
}

interface InstanceQuery {
  runtimeStatus?: number[];
  createdTimeFrom?: Timestamp;
  createdTimeTo?: Timestamp;
  maxInstanceCount?: number;
  continuationToken?: StringValue;
  instanceIdPrefix?: StringValue;
  fetchInputsAndOutputs?: boolean;
}

interface RerunRequest {
  sourceInstanceID?: string;
  eventID?: number;
  newInstanceID?: string;
  input?: StringValue;
  overwriteInput?: boolean;
  newChildWorkflowInstanceID?: string;
}

interface GetInstanceRequest {
  instanceId?: string;
  getInputsAndOutputs?: boolean;
}

const CODES: Record<WorkflowError['code'], grpc.status> = {
  NOT_FOUND: grpc.status.NOT_FOUND,
  CONFLICT: grpc.status.ALREADY_EXISTS,
  INVALID: grpc.status.INVALID_ARGUMENT,
  PRECONDITION: grpc.status.FAILED_PRECONDITION,
};

function toStatus(e: unknown): Partial<grpc.StatusObject> {
  if (e instanceof WorkflowError) return { code: CODES[e.code], details: e.message };
  const code = (e as { grpcCode?: grpc.status })?.grpcCode;
  if (code !== undefined) return { code, details: (e as Error).message };
  return { code: grpc.status.INTERNAL, details: e instanceof Error ? e.message : String(e) };
}

export function taskHubImplementation(engine: Engine, server: GrpcServer): grpc.UntypedServiceImplementation {
  /** Wraps an async handler: token check, errors as gRPC statuses. */
  const unary = <Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>): Unary<Req, Res> => (call, cb) => {
    if (!server.authorized(call.metadata)) return cb(GrpcServer.unauthenticated());
    fn(call.request, call).then((res) => cb(null, res), (e) => cb(toStatus(e)));
  };

  const instanceState = async (id: string, payloads: boolean) => {
    const rec = await engine.get(id);
    return rec ? { exists: true, orchestrationState: toStateMessage(rec, payloads) } : { exists: false };
  };

  const wait = (until: (s: RuntimeStatus) => boolean) =>
    unary<GetInstanceRequest, unknown>(async (req, call) => {
      const id = requireId(req.instanceId);
      const ac = new AbortController();
      call.on('cancelled', () => ac.abort());
      const rec = await engine.waitFor(id, (r) => !r || until(r.status), ac.signal);
      if (engine.closed) throw Object.assign(new Error('the sidecar is shutting down; wait again on the next one'), { grpcCode: grpc.status.UNAVAILABLE });
      return rec ? { exists: true, orchestrationState: toStateMessage(rec, req.getInputsAndOutputs ?? false) } : { exists: false };
    });

  const completeOrchestratorTask = unary<OrchestratorResponse, unknown>(async (req, call) => {
    // proto3 leaves a 0 off the wire and the decoder (defaults off) leaves the field out:
    // durabletask-go, Java and .NET number actions from 0, so a missing id is action 0
    for (const a of req.actions ?? []) a.id ??= 0;
    await engine.completeOrchestrator(req, call.getPeer());
    return {};
  });

  return {
    Hello: unary(async () => ({})),

    StartInstance: unary<{ instanceId?: string; name?: string; version?: StringValue; input?: StringValue; scheduledStartTimestamp?: Timestamp }, unknown>(async (req, call) => {
      if (!req.name) throw new WorkflowError('INVALID', 'name (the workflow to start) is required');
      if (req.instanceId) checkInstanceId(req.instanceId, 'grpc');
      // a start time that has passed starts it at once (the engine's clock decides)
      const scheduledStart = fromTimestamp(req.scheduledStartTimestamp);
      const instanceId = await engine.start({ instanceId: req.instanceId, name: req.name, version: req.version?.value, input: req.input?.value, scheduledStart, trace: metadataContext(call.metadata) });
      return { instanceId };
    }),

    GetInstance: unary<GetInstanceRequest, unknown>(async (req) => instanceState(requireId(req.instanceId), req.getInputsAndOutputs ?? false)),

    WaitForInstanceStart: wait((s) => s !== 'PENDING'),

    WaitForInstanceCompletion: wait(isTerminal),

    RaiseEvent: unary<{ instanceId?: string; name?: string; input?: StringValue }, unknown>(async (req) => {
      if (!req.name) throw new WorkflowError('INVALID', 'name (the event name) is required');
      await engine.raiseEvent(requireId(req.instanceId), req.name, req.input?.value);
      return {};
    }),

    // recursive only when asked for, as the reference sidecar (durabletask-go) does
    TerminateInstance: unary<{ instanceId?: string; output?: StringValue; recursive?: boolean }, unknown>(async (req) => {
      await engine.terminate(requireId(req.instanceId), req.output?.value, req.recursive ?? false);
      return {};
    }),

    SuspendInstance: unary<{ instanceId?: string; reason?: StringValue }, unknown>(async (req) => {
      await engine.suspend(requireId(req.instanceId), req.reason?.value);
      return {};
    }),

    ResumeInstance: unary<{ instanceId?: string; reason?: StringValue }, unknown>(async (req) => {
      await engine.resume(requireId(req.instanceId), req.reason?.value);
      return {};
    }),

    PurgeInstances: unary<{ instanceId?: string; purgeInstanceFilter?: PurgeFilter; recursive?: boolean }, unknown>(async (req) => {
      if (req.purgeInstanceFilter && !req.instanceId) return { deletedInstanceCount: await purgeMatching(engine, req.purgeInstanceFilter, req.recursive ?? false), isComplete: { value: true } };
      return { deletedInstanceCount: await engine.purge(requireId(req.instanceId), req.recursive ?? false) };
    }),

    QueryInstances: unary<{ query?: InstanceQuery }, unknown>(async (req) => {
      const q = req.query ?? {};
      const filter: InstanceFilter = { statuses: statusesOf(q.runtimeStatus), createdFrom: timeOf(q.createdTimeFrom), createdTo: timeOf(q.createdTimeTo), idPrefix: q.instanceIdPrefix?.value };
      const page = await listInstances(engine.table, filter, q.continuationToken?.value || undefined, pageSizeOf(q.maxInstanceCount));
      return { orchestrationState: page.records.map((r) => toStateMessage(r, q.fetchInputsAndOutputs ?? false)), continuationToken: sv(page.next) };
    }),

    // the Microsoft protocol's name, with status and completion-time filters
    ListInstanceIds: unary<{ runtimeStatus?: number[]; completedTimeFrom?: Timestamp; completedTimeTo?: Timestamp; pageSize?: number; lastInstanceKey?: StringValue }, unknown>(async (req) => {
      const filter: InstanceFilter = { statuses: statusesOf(req.runtimeStatus), completedFrom: timeOf(req.completedTimeFrom), completedTo: timeOf(req.completedTimeTo) };
      const page = await listInstances(engine.table, filter, req.lastInstanceKey?.value || undefined, pageSizeOf(req.pageSize));
      return { instanceIds: page.records.map((r) => r.id), lastInstanceKey: sv(page.next) };
    }),

    // the Dapr protocol's name: pages only
    ListInstanceIDs: unary<{ continuationToken?: string; pageSize?: number }, unknown>(async (req) => {
      const page = await listInstances(engine.table, {}, req.continuationToken || undefined, pageSizeOf(req.pageSize));
      return { instanceIds: page.records.map((r) => r.id), continuationToken: page.next };
    }),

    GetInstanceHistory: unary<{ instanceId?: string }, unknown>(async (req) => ({ events: await engine.history(requireId(req.instanceId)) })),

    StreamInstanceHistory: (call: grpc.ServerWritableStream<{ instanceId?: string }, { events: HistoryEvent[] }>) => {
      if (!server.authorized(call.metadata)) {
        call.emit('error', GrpcServer.unauthenticated());
        return;
      }
      Promise.resolve(call.request.instanceId).then((id) => engine.history(requireId(id))).then(
        (events) => {
          for (let i = 0; i < events.length; i += HISTORY_CHUNK) call.write({ events: events.slice(i, i + HISTORY_CHUNK) });
          call.end();
        },
        (e) => call.emit('error', toStatus(e)),
      );
    },

    RestartInstance: unary<{ instanceId?: string; restartWithNewInstanceId?: boolean }, unknown>(async (req) => ({
      instanceId: await engine.restart(requireId(req.instanceId), req.restartWithNewInstanceId ?? false),
    })),

    GetWorkItems: (call: grpc.ServerWritableStream<unknown, WorkItem>) => {
      if (!server.authorized(call.metadata)) {
        call.emit('error', GrpcServer.unauthenticated());
        return;
      }
      const id = engine.workers.addStream(call);
      let gone = false;
      const bye = () => {
        if (gone) return;
        gone = true;
        engine.workers.removeStream(id);
      };
      call.on('cancelled', bye);
      call.on('close', bye);
      call.on('error', bye);
      call.on('finish', bye);
    },

    CompleteOrchestratorTask: completeOrchestratorTask,
    CompleteWorkflowTask: completeOrchestratorTask,

    CompleteActivityTask: unary<ActivityResponse, unknown>(async (req, call) => {
      req.taskId ??= 0; // task 0, as above
      await engine.completeActivity(req, call.getPeer());
      return {};
    }),

    RerunWorkflowFromEvent: unary<RerunRequest, unknown>(async (req, call) => {
      const sourceId = requireId(req.sourceInstanceID, 'sourceInstanceID');
      if (req.newInstanceID) checkInstanceId(req.newInstanceID, 'grpc');
      if (req.newChildWorkflowInstanceID) {
        throw new WorkflowError('INVALID', 'newChildWorkflowInstanceID applies to a rerun from a child workflow event, which is not supported: rerun from an activity event');
      }
      const newInstanceID = await engine.rerun({
        sourceId,
        eventId: req.eventID ?? 0,
        newId: req.newInstanceID,
        input: req.overwriteInput ? { value: req.input?.value } : undefined,
        trace: metadataContext(call.metadata),
      });
      return { newInstanceID };
    }),

    // a token that names nothing in flight any more (answered, given back) is not an error
    AbandonTaskOrchestratorWorkItem: unary<{ completionToken?: string }, unknown>(async (req) => {
      engine.workers.abandon('run', requireToken(req.completionToken));
      return {};
    }),

    AbandonTaskActivityWorkItem: unary<{ completionToken?: string }, unknown>(async (req) => {
      engine.workers.abandon('activity', requireToken(req.completionToken));
      return {};
    }),

    // task hubs are created by the engine itself; nothing to do for these
    CreateTaskHub: unary(async () => ({})),
    DeleteTaskHub: unary(async () => ({})),
  };
}

function requireId(id: string | undefined, field = 'instanceId'): string {
  if (!id) throw new WorkflowError('INVALID', `${field} is required`);
  return id;
}

function requireToken(token: string | undefined): string {
  if (!token) throw new WorkflowError('INVALID', 'completionToken (from the work item) is required');
  return token;
}

/** Purge by filter: every finished instance that matches (unfinished ones are left alone). */
async function purgeMatching(engine: Engine, f: PurgeFilter, recursive: boolean): Promise<number> {
  const statuses = statusesOf(f.runtimeStatus);
  const { records } = await listInstances(engine.table, { statuses, createdFrom: timeOf(f.createdTimeFrom), createdTo: timeOf(f.createdTimeTo) }, undefined, 0);
  let n = 0;
  for (const r of records) {
    if (!isTerminal(r.status)) continue;
    n += await engine.purge(r.id, recursive).catch((e) => {
      if (e instanceof WorkflowError) return 0; // purged or restarted meanwhile
      throw e;
    });
  }
  return n;
}
