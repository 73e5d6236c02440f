/**
 * The Durable Task protocol as plain JS objects: loads our .proto (grpc/service-definition.ts) and
 * describes the message shapes the engine reads and writes. History events are kept in exactly
 * this shape (also in storage), so a work item is built without any conversion step.
 */
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { loadServiceDefinition } from '../grpc/service-definition.ts';
import type { TraceContextMessage } from '../tracing/workflows.ts';

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

/**
 * Dapr protocol's ORCHESTRATION_STATUS_STALLED: shown over gRPC while a RUNNING instance waits for
 * a worker with its version or patches. Not a RuntimeStatus: the HTTP API's statuses have none.
 */
export const STALLED_STATUS = 8;

/** Dapr protocol's StalledReason. */
export const StalledReason = { PATCH_MISMATCH: 0, VERSION_NOT_AVAILABLE: 1 } as const;
export type StallReason = keyof typeof StalledReason;

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

/** Dapr protocol: the patches a run saw and the name of the workflow version that ran. */
export interface OrchestrationVersion {
  patches?: string[];
  name?: string | null;
}

/** Dapr protocol enum HistoryPropagationScope: NONE 0, OWN_HISTORY 1, LINEAGE 2. */
export const PropagationScope = { NONE: 0, OWN_HISTORY: 1, LINEAGE: 2 } as const;

/** One workflow's history, each event encoded as a HistoryEvent message (base64 in storage). */
export interface PropagatedHistoryChunk {
  rawEvents: (string | Uint8Array)[];
  appId: string;
  instanceId: string;
  workflowName: string;
}

/** Dapr protocol: the history a workflow hands to an activity or a child workflow. */
export interface PropagatedHistory {
  scope: number;
  chunks: PropagatedHistoryChunk[];
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
    /** The start's context and the orchestration span's id (tracing on: tracing/workflows.ts). */
    parentTraceContext?: TraceContextMessage | null;
    orchestrationSpanID?: StringValue | null;
  };
  executionCompleted?: { orchestrationStatus: number; result?: StringValue | null; failureDetails?: FailureDetails | null };
  executionTerminated?: { input?: StringValue | null; recurse?: boolean };
  taskScheduled?: { name: string; version?: StringValue | null; input?: StringValue | null; parentTraceContext?: TraceContextMessage | null; historyPropagationScope?: number | null };
  taskCompleted?: { taskScheduledId: number; result?: StringValue | null };
  taskFailed?: { taskScheduledId: number; failureDetails?: FailureDetails | null };
  subOrchestrationInstanceCreated?: { instanceId: string; name: string; version?: StringValue | null; input?: StringValue | null; parentTraceContext?: TraceContextMessage | null; historyPropagationScope?: number | null };
  subOrchestrationInstanceCompleted?: { taskScheduledId: number; result?: StringValue | null };
  subOrchestrationInstanceFailed?: { taskScheduledId: number; failureDetails?: FailureDetails | null };
  timerCreated?: { fireAt?: Timestamp | null };
  timerFired?: { fireAt?: Timestamp | null; timerId: number };
  /** `version`: what the worker answered that run with (Dapr protocol). */
  orchestratorStarted?: { version?: OrchestrationVersion | null };
  orchestratorCompleted?: Record<string, never>;
  eventSent?: { instanceId: string; name: string; input?: StringValue | null };
  eventRaised?: { name: string; input?: StringValue | null };
  continueAsNew?: { input?: StringValue | null };
  executionSuspended?: { input?: StringValue | null };
  executionResumed?: { input?: StringValue | null };
  executionStalled?: { reason: number; description?: string | null };
  /** Set by proto-loader (oneofs: true) on decoded events: the name of the member present. */
  eventType?: string;
}

export interface OrchestratorAction {
  id: number;
  /** Dapr protocol: the app the action is meant for (cross-app workflows). */
  router?: { sourceAppID?: string; targetAppID?: string | null; targetAppNamespace?: string | null } | null;
  scheduleTask?: { name: string; version?: StringValue | null; input?: StringValue | null; historyPropagationScope?: number | null } | null;
  createSubOrchestration?: { instanceId: string; name: string; version?: StringValue | null; input?: StringValue | null; historyPropagationScope?: number | null } | null;
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
  version?: OrchestrationVersion | null;
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
  propagatedHistory?: PropagatedHistory;
}

export interface ActivityRequest {
  name: string;
  input?: StringValue;
  orchestrationInstance: OrchestrationInstance;
  taskId: number;
  parentTraceContext?: TraceContextMessage;
  propagatedHistory?: PropagatedHistory;
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
  executionId?: StringValue;
  completedTimestamp?: Timestamp;
  parentInstanceId?: StringValue;
  startedAt?: Timestamp;
}

let cached: grpc.ServiceDefinition | undefined;

/** The TaskHubSidecarService definition (loaded once per process). */
export function taskHubService(): grpc.ServiceDefinition {
  if (cached) return cached;
  // the light loader: same encoding as @grpc/proto-loader, without its reflection descriptors
  const def = loadServiceDefinition(PROTO_PATH, 'TaskHubSidecarService', { keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true });
  const complete = def.CompleteOrchestratorTask;
  const decode = complete.requestDeserialize;
  cached = { ...def, CompleteOrchestratorTask: { ...complete, requestDeserialize: (bytes: Buffer) => decode(withoutSubOrchestrationTags(bytes)) } };
  return cached;
}

/**
 * The worker's answer without the Microsoft protocol's sub-orchestration tags. They are a map at
 * field 6 of CreateSubOrchestrationAction (OrchestratorResponse.actions = 2,
 * OrchestratorAction.createSubOrchestration = 3), where the Dapr protocol has the enum
 * historyPropagationScope. protobufjs reads a field by its number whatever its wire type, so a
 * map entry would be read as a varint and shift every field after it; a real scope is a varint
 * (wire type 0), a map entry is length-delimited (2). Bytes without such entries are returned as
 * they are; bytes that do not parse are left to the decoder.
 */
export function withoutSubOrchestrationTags(bytes: Buffer): Buffer {
  return rewriteLen(bytes, 2, (action) => rewriteLen(action, 3, (sub) => dropLen(sub, 6)));
}

interface WireField {
  field: number;
  wire: number;
  /** The whole field, tag included. */
  start: number;
  end: number;
  /** Just after the tag. */
  afterTag: number;
  /** Where a length-delimited field's contents start. */
  body: number;
}

/** The top-level fields of a message, or undefined when it does not parse. */
function fieldsOf(b: Buffer): WireField[] | undefined {
  const out: WireField[] = [];
  let pos = 0;
  const varint = (): number | undefined => {
    let v = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (pos >= b.length) return undefined;
      const byte = b[pos++];
      if (shift < 35) v += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return v;
    }
    return undefined;
  };
  while (pos < b.length) {
    const start = pos;
    const tag = varint();
    if (tag === undefined) return undefined;
    const wire = tag % 8;
    const afterTag = pos;
    let body = pos;
    if (wire === 0) {
      if (varint() === undefined) return undefined;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const n = varint();
      if (n === undefined) return undefined;
      body = pos;
      pos += n;
    } else return undefined; // groups: not in these messages
    if (pos > b.length) return undefined;
    out.push({ field: Math.floor(tag / 8), wire, start, end: pos, afterTag, body });
  }
  return out;
}

/** The message with `fn` applied to the contents of its length-delimited fields `field`. */
function rewriteLen(b: Buffer, field: number, fn: (inner: Buffer) => Buffer): Buffer {
  const fields = fieldsOf(b);
  if (!fields) return b;
  let changed = false;
  const parts = fields.map((f) => {
    const whole = b.subarray(f.start, f.end);
    if (f.field !== field || f.wire !== 2) return whole;
    const inner = b.subarray(f.body, f.end);
    const next = fn(inner);
    if (next === inner) return whole;
    changed = true;
    return Buffer.concat([b.subarray(f.start, f.afterTag), encodeVarint(next.length), next]);
  });
  return changed ? Buffer.concat(parts) : b;
}

/** The message without its length-delimited fields `field`. */
function dropLen(b: Buffer, field: number): Buffer {
  const fields = fieldsOf(b);
  if (!fields?.some((f) => f.field === field && f.wire === 2)) return b;
  return Buffer.concat(fields.filter((f) => !(f.field === field && f.wire === 2)).map((f) => b.subarray(f.start, f.end)));
}

function encodeVarint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
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
