/**
 * A raw TaskHub worker for the workflow tracing tests: it runs workflow `flow` (activity `first`,
 * task 0, then `second`, task 1, then completes; an instance whose id starts "par-" schedules both
 * at once), records every ActivityRequest it gets and answers those `answer` accepts.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { PROTO_PATH, type ActivityRequest, type HistoryEvent, type WorkItem } from '../../sidecar/src/workflows/proto.ts';

type Unary = (req: unknown, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void;
type TaskHub = grpc.Client & Record<string, Unary> & { GetWorkItems(req: unknown): grpc.ClientReadableStream<WorkItem> };

/** A raw TaskHub worker: the workflow runs activity `first` (task 0), then `second` (task 1), then completes. */
export function connectWorker(sidecar: Sidecar, answer: (a: ActivityRequest) => boolean): { seen: ActivityRequest[]; rerun(sourceId: string, eventId: number, newId: string, traceparent?: string): Promise<void>; stop(): void } {
  const def = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
  const Svc = (grpc.loadPackageDefinition(def) as unknown as Record<string, grpc.ServiceClientConstructor>).TaskHubSidecarService;
  const hub = new Svc(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure()) as unknown as TaskHub;
  const call = (name: string, req: unknown) => hub[name](req, () => undefined);
  const seen: ActivityRequest[] = [];
  const items = hub.GetWorkItems({});
  items.on('error', () => undefined);
  items.on('data', (wi: WorkItem) => {
    if ('orchestratorRequest' in wi && wi.orchestratorRequest) {
      const req = wi.orchestratorRequest;
      const events: HistoryEvent[] = [...(req.pastEvents ?? []), ...(req.newEvents ?? [])];
      const done = new Set(events.flatMap((e) => (e.taskCompleted ? [e.taskCompleted.taskScheduledId] : [])));
      const scheduled = new Set(events.flatMap((e) => (e.taskScheduled ? [e.eventId] : [])));
      // as an SDK does: only the actions the history does not hold yet
      const actions: unknown[] = [];
      // an instance whose id starts "par-" schedules both at once (fan-out)
      const parallel = req.instanceId.startsWith('par-');
      if (!scheduled.has(0)) actions.push({ id: 0, scheduleTask: { name: 'first', input: { value: '1' } } });
      if ((parallel || done.has(0)) && !scheduled.has(1)) actions.push({ id: 1, scheduleTask: { name: 'second', input: { value: '2' } } });
      if (done.has(1)) actions.push({ id: 2, completeOrchestration: { orchestrationStatus: 1, result: { value: '"ok"' } } });
      call('CompleteOrchestratorTask', { instanceId: req.instanceId, actions });
    } else if ('activityRequest' in wi && wi.activityRequest) {
      const a = wi.activityRequest;
      seen.push(a);
      if (answer(a)) call('CompleteActivityTask', { instanceId: a.orchestrationInstance.instanceId, taskId: a.taskId, result: { value: '3' } });
    }
  });
  return {
    seen,
    rerun: (sourceInstanceID, eventID, newInstanceID, traceparent) => {
      const md = new grpc.Metadata();
      if (traceparent) md.set('traceparent', traceparent);
      const rerun = hub.RerunWorkflowFromEvent as unknown as (req: unknown, md: grpc.Metadata, cb: (e: grpc.ServiceError | null) => void) => void;
      return new Promise((res, rej) => rerun.call(hub, { sourceInstanceID, eventID, newInstanceID }, md, (e) => (e ? rej(new Error(`RerunWorkflowFromEvent: ${e.message}`)) : res())));
    },
    stop: () => {
      items.cancel();
      hub.close();
    },
  };
}
