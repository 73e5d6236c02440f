/**
 * What the engine stores per workflow instance. One small JSON record (`…||m`) holds the
 * status, the inbox of events not yet shown to the orchestrator, pending activities and timers
 * and the lease; the history is append-only in batches (`…||h0`, `…||h1`, one key per
 * orchestrator step), so a step writes the record plus one new key.
 */
import type { FailureDetails, HistoryEvent, PropagatedHistory, RuntimeStatus, StallReason } from './proto.ts';

export interface ParentRef {
  instanceId: string;
  executionId?: string;
  taskId: number;
  name: string;
  version?: string;
}

export interface InstanceRecord {
  /** Bumped on every write; lets a replica tell whether its cached copy is current. */
  v: number;
  id: string;
  name: string;
  /** The orchestration version asked for at start (CreateInstanceRequest / sub-orchestration action). */
  version?: string;
  status: RuntimeStatus;
  /** ms since epoch */
  createdAt: number;
  updatedAt: number;
  scheduledStart?: number;
  /** When its first run was applied (GetInstance's startedAt); older records fall back to createdAt. */
  startedAt?: number;
  input?: string;
  output?: string;
  customStatus?: string;
  failure?: FailureDetails;
  executionId: string;
  parent?: ParentRef;
  /**
   * The history this instance received (Dapr protocol history propagation: from its parent, or
   * from its previous execution after a continue-as-new); sent with every run.
   */
  propagated?: PropagatedHistory;
  /** Number of history batches stored (keys h0 … h<chunks-1>). */
  chunks: number;
  /** Events waiting for the next orchestrator run, in arrival order. */
  inbox: HistoryEvent[];
  /** Who may dispatch the orchestrator: set while a run is queued or in flight. */
  lease?: { owner: string; at: number };
  /** Activities scheduled and not yet answered, by task id; owner = replica that dispatches them. */
  acts: Record<string, { name: string; input?: string; owner: string }>;
  /** Durable timers not yet fired, by timer id. */
  timers: Record<string, { fireAt: number; owner: string }>;
  /** Sub-orchestrations created (for recursive terminate and purge). */
  children: string[];
  /** Set when the instance was terminated with its sub-orchestrations (checked by recovery). */
  terminatedRecursively?: boolean;
  /** A rerun's first run is due although nothing waits in the inbox (see rerun.ts). */
  runDue?: boolean;
  /**
   * Set while the last run could not be applied: the worker did not have the version this
   * instance runs (WorkflowVersionNotAvailableAction), or its patches did not begin with those in
   * the history. The reference runtime's STALLED: gRPC shows that status; the HTTP API's statuses
   * have none, so there the status stays and the property `rt.workflow.stalled` says why.
   */
  stalled?: { reason: StallReason; since: number; description?: string };
  /** A rerun that replaces the input of the activity it starts from: applied when it is scheduled. */
  rerunInput?: { taskId: number; input?: string };
}

export const TERMINAL: ReadonlySet<RuntimeStatus> = new Set<RuntimeStatus>(['COMPLETED', 'FAILED', 'TERMINATED', 'CANCELED']);

export function isTerminal(status: RuntimeStatus): boolean {
  return TERMINAL.has(status);
}

/**
 * The status gRPC shows: the reference runtime's STALLED while a RUNNING (or not yet started)
 * instance is stalled, else the stored one. The HTTP API shows the stored one.
 */
export function shownStatus(rec: InstanceRecord): RuntimeStatus | 'STALLED' {
  return rec.stalled && (rec.status === 'RUNNING' || rec.status === 'PENDING') ? 'STALLED' : rec.status;
}
