/**
 * What the engine knows about one workflow instance. `InstanceState` is its runtime state, a
 * function of the instance's journal (see reducer.ts: nothing else changes it).
 * `InstanceRecord` is that state as cached in the store (`…||m`), with the storage bookkeeping
 * the table adds; the journal itself is stored in batches (`…||h0`, `…||h1`, one key per write),
 * and the record can always be rebuilt from them.
 */
import type { FailureDetails, HistoryEvent, PropagatedHistory, RuntimeStatus, StallReason } from './proto.ts';

export interface ParentRef {
  instanceId: string;
  executionId?: string;
  taskId: number;
  name: string;
  version?: string;
}

export interface InstanceState {
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
  /** Events waiting for the next orchestrator run, in arrival order. */
  inbox: HistoryEvent[];
  /** Who may dispatch the orchestrator: set while a run is queued or in flight. */
  lease?: { owner: string; at: number };
  /** Activities scheduled and not yet answered, by task id; owner = replica that dispatches them. */
  acts: Record<string, { name: string; input?: string; owner: string }>;
  /** Durable timers not yet fired, by timer id (`start`: a delayed start). */
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

/** The cached state as stored, with the table's bookkeeping. */
export interface InstanceRecord extends InstanceState {
  /** Bumped on every write; lets a replica tell whether its cached copy is current. */
  v: number;
  /**
   * Where the journal ends (batches `h<from>` … `h<chunks-1>`). In the cache, the end; in a stored
   * record, the end when it was written: batches of writes that did not change what the record
   * shows may follow (journal.ts).
   */
  chunks: number;
  /** The journal's first batch, when it is not h0 (after a continue-as-new; h0 then points at it). */
  from?: number;
  /**
   * JOURNAL_FORMAT when the batches are a journal (reducer.ts); absent in records written by
   * versions that kept the state by hand, whose batches hold only the shown history.
   */
  fmt?: number;
}

export const TERMINAL: ReadonlySet<RuntimeStatus> = new Set<RuntimeStatus>(['COMPLETED', 'FAILED', 'TERMINATED', 'CANCELED']);

export function isTerminal(status: RuntimeStatus): boolean {
  return TERMINAL.has(status);
}

/**
 * The status gRPC shows: the reference runtime's STALLED while a RUNNING (or not yet started)
 * instance is stalled, else the stored one. The HTTP API shows the stored one.
 */
export function shownStatus(rec: InstanceState): RuntimeStatus | 'STALLED' {
  return rec.stalled && (rec.status === 'RUNNING' || rec.status === 'PENDING') ? 'STALLED' : rec.status;
}
