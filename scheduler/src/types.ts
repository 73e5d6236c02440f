/**
 * The scheduler's data model: what identifies a job, what a caller sends, what is stored,
 * and what a trigger carries to a sidecar. Shared by the engine, the stores, the gRPC service
 * and the sidecar's client.
 */

/** Who a job belongs to. `owner` '' = the app's own jobs; other owners are internal (e.g. workflow timers). */
export interface JobKey {
  namespace: string;
  appId: string;
  owner: string;
  name: string;
}

/** The jobs of one app (and one owner), for list calls. */
export type JobOwnerRef = Omit<JobKey, 'name'>;

/** Where triggers go: every sidecar of one app id in one namespace. */
export interface Target {
  namespace: string;
  appId: string;
}

export type FailurePolicy = { kind: 'drop' } | { kind: 'constant'; intervalMs: number; /** undefined = retry forever */ maxRetries?: number };

export const DEFAULT_FAILURE_POLICY: FailurePolicy = { kind: 'constant', intervalMs: 1000, maxRetries: 3 };

/** A job as the caller wrote it (strings kept as given so GET returns them unchanged). */
export interface JobSpec {
  schedule?: string;
  dueTime?: string;
  repeats?: number;
  ttl?: string;
  /** The payload as JSON text (the HTTP API's `data`, internal jobs); undefined = no data. */
  dataJson?: string;
  /** The payload as the Any it was scheduled with over gRPC, kept byte for byte; never set together with dataJson. */
  dataAny?: JobDataAny;
  failurePolicy?: FailurePolicy;
}

/**
 * A google.protobuf.Any as a job's data (the gRPC API's `Job.data`): the caller's type_url
 * (possibly empty, as the SDKs' jobs examples send JSON bytes) and value bytes, base64 here so
 * that a spec stays plain JSON in the stores. Kept unchanged so GetJob and the app's
 * OnJobEvent get back what was scheduled, as the reference runtime does.
 */
export interface JobDataAny {
  typeUrl: string;
  /** The value bytes, base64. */
  value: string;
}

/** A stored job: the spec plus what the scheduler needs to continue after a restart. */
export interface JobRecord {
  key: JobKey;
  spec: JobSpec;
  /** ms since epoch; durations in dueTime/ttl count from here. */
  createdAt: number;
  /** Changes on every (over)write, so progress of a replaced job is never applied to its successor. */
  gen: string;
  /** Triggers completed (acked or given up). */
  count: number;
  /** When the next trigger is due (ms since epoch); null = nothing left to fire. */
  nextAt: number | null;
  /** ttl as ms since epoch. */
  expiresAt?: number;
  /** The id of the create request that wrote it: a retry of that request finds its own job. */
  requestId?: string;
}

/** One firing of a job, sent to one sidecar of the job's app. */
export interface Trigger {
  /** Unique per delivery attempt; the sidecar acks with it. */
  id: string;
  key: JobKey;
  dataJson?: string;
  dataAny?: JobDataAny;
  dueAt: number;
  attempt: number;
  /** Generation of the job it fires (scheduler-internal; not sent to sidecars). */
  gen?: string;
}

export type SchedulerErrorKind = 'invalid' | 'exists' | 'not_found' | 'unavailable' | 'internal';

/** A failure the API can map to a status: invalid → 400, exists → 409, not_found/others → 500. */
export class SchedulerError extends Error {
  readonly kind: SchedulerErrorKind;
  readonly errorCode: string;

  constructor(kind: SchedulerErrorKind, errorCode: string, message: string) {
    super(message);
    this.name = 'SchedulerError';
    this.kind = kind;
    this.errorCode = errorCode;
  }
}

export const invalid = (errorCode: string, message: string) => new SchedulerError('invalid', errorCode, message);

/** The API operations on jobs and the error code each answers with when the scheduler fails. */
export type JobOperation = 'schedule' | 'get' | 'delete' | 'list';
export const JOB_OPERATION_ERROR_CODES: Record<JobOperation, string> = {
  schedule: 'RT_SCHEDULER_SCHEDULE_JOB',
  get: 'RT_SCHEDULER_GET_JOB',
  delete: 'RT_SCHEDULER_DELETE_JOB',
  list: 'RT_SCHEDULER_LIST_JOBS',
};

export function keyString(k: JobKey): string {
  return `${k.namespace}\u0000${k.appId}\u0000${k.owner}\u0000${k.name}`;
}

export function targetString(t: Target): string {
  return `${t.namespace}\u0000${t.appId}`;
}

/** Limits on names: they travel in URLs and store keys. */
export const MAX_JOB_NAME = 512;
export const MAX_DATA_BYTES = 4 * 1024 * 1024;
