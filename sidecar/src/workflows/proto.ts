/**
 * The Durable Task protocol as plain JS objects: loads our .proto (grpc/service-definition.ts) and
 * describes the message shapes the engine reads and writes. History events are kept in exactly
 * this shape (also in storage), so a work item is built without any conversion step.
 */
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { loadServiceDefinition } from '../grpc/service-definition.ts';

export const PROTO_PATH = fileURLToPath(new URL('./proto/orchestrator_service.proto', import.meta.url));

/** Proto enum OrchestrationStatus. */
export const OrchestrationStatus = {
  RUNNING: 0,
  COMPLETED: 1,
  CONTINUED_AS_NEW: 2,
  FAILED: 3,
  CANCELED: 4,
  TERMINATED: 5,
  PENDING: 6,
  SUSPENDED: 7,
} as const;

export type RuntimeStatus = keyof typeof OrchestrationStatus;

export const STATUS_BY_NUMBER: RuntimeStatus[] = ['RUNNING', 'COMPLETED', 'CONTINUED_AS_NEW', 'FAILED', 'CANCELED', 'TERMINATED', 'PENDING', 'SUSPENDED'];

export interface Timestamp {
  seconds: number;
  nanos: number;
}

export interface StringValue {
  value: string;
}

export interface FailureDetails {
  errorType?: string;
  errorMessage?: string;
  stackTrace?: StringValue | null;
  innerFailure?: FailureDetails | null;
  isNonRetriable?: boolean;
}

export interface OrchestrationInstance {
  instanceId: string;
  executionId?: StringValue | null;
}

/** One history event: eventId, timestamp and exactly one of the event members. */
export interface HistoryEvent {
  eventId: number;
  timestamp?: Timestamp | null;
  executionStarted?: {
    name: string;
    version?: StringValue | null;
    input?: StringValue | null;
    orchestrationInstance?: OrchestrationInstance;
    parentInstance?: { taskScheduledId: number; name?: StringValue | null; version?: StringValue | null; orchestrationInstance?: OrchestrationInstance } | null;
    scheduledStartTimestamp?: Timestamp | null;
  };
  executionCompleted?: { orchestrationStatus: number; result?: StringValue | null; failureDetails?: FailureDetails | null };
  executionTerminated?: { input?: StringValue | null; recurse?: boolean };
  taskScheduled?: { name: string; version?: StringValue | null; input?: StringValue | null };
  taskCompleted?: { taskScheduledId: number; result?: StringValue | null };
  taskFailed?: { taskScheduledId: number; failureDetails?: FailureDetails | null };
  subOrchestrationInstanceCreated?: { instanceId: string; name: string; version?: StringValue | null; input?: StringValue | null };
  subOrchestrationInstanceCompleted?: { taskScheduledId: number; result?: StringValue | null };
  subOrchestrationInstanceFailed?: { taskScheduledId: number; failureDetails?: FailureDetails | null };
  timerCreated?: { fireAt?: Timestamp | null };
  timerFired?: { fireAt?: Timestamp | null; timerId: number };
  orchestratorStarted?: Record<string, never>;
  orchestratorCompleted?: Record<string, never>;
  eventSent?: { instanceId: string; name: string; input?: StringValue | null };
  eventRaised?: { name: string; input?: StringValue | null };
  continueAsNew?: { input?: StringValue | null };
  executionSuspended?: { input?: StringValue | null };
  executionResumed?: { input?: StringValue | null };
  /** Set by proto-loader (oneofs: true) on decoded events: the name of the member present. */
  eventType?: string;
}

export interface OrchestratorAction {
  id: number;
  scheduleTask?: { name: string; version?: StringValue | null; input?: StringValue | null } | null;
  createSubOrchestration?: { instanceId: string; name: string; version?: StringValue | null; input?: StringValue | null } | null;
  createTimer?: { fireAt?: Timestamp | null } | null;
  sendEvent?: { instance?: OrchestrationInstance | null; name: string; data?: StringValue | null } | null;
  completeOrchestration?: {
    orchestrationStatus?: number;
    result?: StringValue | null;
    details?: StringValue | null;
    newVersion?: StringValue | null;
    carryoverEvents?: HistoryEvent[];
    failureDetails?: FailureDetails | null;
  } | null;
  terminateOrchestration?: { instanceId: string; reason?: StringValue | null; recurse?: boolean } | null;
  /** Declared so that they can be named when refused; the engine carries none of them out. */
  sendEntityMessage?: Record<string, unknown> | null;
  workflowVersionNotAvailable?: Record<string, unknown> | null;
  createDetachedWorkflow?: Record<string, unknown> | null;
  orchestratorActionType?: string;
}

export interface OrchestratorResponse {
  instanceId: string;
  actions?: OrchestratorAction[];
  customStatus?: StringValue | null;
}

export interface ActivityResponse {
  instanceId: string;
  taskId: number;
  result?: StringValue | null;
  failureDetails?: FailureDetails | null;
}

export interface OrchestratorRequest {
  instanceId: string;
  executionId: StringValue;
  pastEvents: HistoryEvent[];
  newEvents: HistoryEvent[];
}

export interface ActivityRequest {
  name: string;
  input?: StringValue;
  orchestrationInstance: OrchestrationInstance;
  taskId: number;
}

export type WorkItem = ({ orchestratorRequest: OrchestratorRequest } | { activityRequest: ActivityRequest }) & { completionToken?: string };

export interface OrchestrationStateMsg {
  instanceId: string;
  name: string;
  version?: StringValue;
  orchestrationStatus: number;
  scheduledStartTimestamp?: Timestamp;
  createdTimestamp: Timestamp;
  lastUpdatedTimestamp: Timestamp;
  input?: StringValue;
  output?: StringValue;
  customStatus?: StringValue;
  failureDetails?: FailureDetails;
}

let cached: grpc.ServiceDefinition | undefined;

/** The TaskHubSidecarService definition (loaded once per process). */
export function taskHubService(): grpc.ServiceDefinition {
  if (cached) return cached;
  // the light loader: same encoding as @grpc/proto-loader, without its reflection descriptors
  cached = loadServiceDefinition(PROTO_PATH, 'TaskHubSidecarService', { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
  return cached;
}

export function toTimestamp(ms: number): Timestamp {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

export function fromTimestamp(ts: Timestamp | null | undefined): number | undefined {
  if (!ts) return undefined;
  return Number(ts.seconds ?? 0) * 1000 + Math.floor(Number(ts.nanos ?? 0) / 1e6);
}

export function sv(value: string | undefined | null): StringValue | undefined {
  return value === undefined || value === null ? undefined : { value };
}
