/**
 * Durable Task messages built from an instance's state: the OrchestrationState clients read,
 * the parent reference a child's ExecutionStarted carries, the OrchestratorRequest of a run.
 */
import { OrchestrationStatus, STALLED_STATUS, sv, toTimestamp, type HistoryEvent, type OrchestrationStateMsg, type OrchestratorRequest } from './proto.ts';
import { isTerminal, shownStatus, type InstanceState, type ParentRef } from './record.ts';

/** The OrchestrationState message of an instance. */
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

/** ExecutionStartedEvent.parentInstance of a sub-orchestration. */
export function parentInfo(parent: ParentRef | undefined): NonNullable<HistoryEvent['executionStarted']>['parentInstance'] {
  if (!parent) return undefined;
  return {
    taskScheduledId: parent.taskId,
    name: sv(parent.name),
    version: sv(parent.version),
    orchestrationInstance: { instanceId: parent.instanceId, executionId: sv(parent.executionId) },
  };
}

/** The work item of a run: the history so far, then `started` and what waits in the inbox. */
export function runRequest(rec: InstanceState, history: readonly HistoryEvent[], started: HistoryEvent): OrchestratorRequest {
  return {
    instanceId: rec.id,
    executionId: { value: rec.executionId },
    // OrchestratorCompleted markers (stored by older versions) are not sent: the reference
    // sidecar sends none, and the SDKs log every one as an unknown event on each replay; nor
    // ExecutionStalled markers: no SDK acts on them, and older ones log each as unknown
    pastEvents: history.filter((e) => !e.orchestratorCompleted && !e.executionStalled),
    newEvents: [started, ...rec.inbox],
    propagatedHistory: rec.propagated,
  };
}
