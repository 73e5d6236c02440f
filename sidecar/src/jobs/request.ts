/**
 * The HTTP body of POST /v1.0-alpha1/jobs/<name>, as its schema (schemas.ts) lets it through →
 * a JobSpec. What the values mean is checked by the scheduler's validator; a failure policy's
 * form (one of drop and constant, a duration) here.
 */
import { formatDuration, parseDuration } from '../../../shared/duration.ts';
import type { FailurePolicy, JobRecord, JobSpec } from '../../../scheduler/src/index.ts';
import { dataView } from './data.ts';
import { jobInvalid as invalid } from './service.ts';

export interface ScheduleRequest {
  spec: JobSpec;
  overwrite: boolean;
}

/** The members of a schedule body (or of its {"job": {...}} wrapper). */
interface JobFields {
  schedule?: string | null;
  dueTime?: string | null;
  ttl?: string | null;
  repeats?: number | null;
  data?: unknown;
  overwrite?: boolean | null;
  failurePolicy?: Record<string, unknown> | null;
  job?: JobFields;
}

export function scheduleRequestOf(body: JobFields): ScheduleRequest {
  // earlier alpha clients wrapped the fields in {"job": {...}}
  const keys = Object.keys(body);
  const o = keys.length === 1 && keys[0] === 'job' && body.job ? body.job : body;
  const spec: JobSpec = {};
  if (typeof o.schedule === 'string') spec.schedule = o.schedule;
  if (typeof o.dueTime === 'string') spec.dueTime = o.dueTime;
  if (typeof o.ttl === 'string') spec.ttl = o.ttl;
  if (typeof o.repeats === 'number') spec.repeats = o.repeats;
  if (o.data !== undefined) spec.dataJson = JSON.stringify(o.data);
  if (o.failurePolicy) spec.failurePolicy = parseFailurePolicy(o.failurePolicy);
  return { spec, overwrite: o.overwrite === true };
}

/** {"drop": {}} or {"constant": {"interval": "5s", "maxRetries": 3}} (maxRetries absent = forever); the types are the schema's. */
function parseFailurePolicy(o: Record<string, unknown>): FailurePolicy {
  const code = 'RT_SCHEDULER_FAILURE_POLICY_INVALID';
  if ('drop' in o && 'constant' in o) throw invalid(code, 'failurePolicy: give either "drop" or "constant", not both');
  if ('drop' in o) return { kind: 'drop' };
  if (!('constant' in o)) throw invalid(code, 'failurePolicy: must hold "drop" or "constant"');
  const c = (o.constant ?? {}) as { interval?: string | null; maxRetries?: number | null };
  let intervalMs = 1000;
  if (typeof c.interval === 'string') {
    const d = parseDuration(c.interval);
    if (d === undefined || d < 0) throw invalid(code, `failurePolicy.constant.interval: must be a duration such as "1s" or "500ms", got ${describe(c.interval)}`);
    intervalMs = d;
  }
  return { kind: 'constant', intervalMs, maxRetries: typeof c.maxRetries === 'number' ? c.maxRetries : undefined };
}

/** The GET answer: the fields as the caller wrote them, absent ones left out. */
export function jobView(rec: JobRecord): Record<string, unknown> {
  const s = rec.spec;
  const out: Record<string, unknown> = { name: rec.key.name };
  if (s.schedule !== undefined) out.schedule = s.schedule;
  if (s.dueTime !== undefined) out.dueTime = s.dueTime;
  if (s.repeats !== undefined) out.repeats = s.repeats;
  if (s.ttl !== undefined) out.ttl = s.ttl;
  // JSON as written over HTTP; data scheduled over gRPC as data.ts shows an Any
  const data = dataView(s);
  if (data !== undefined) out.data = data;
  if (s.failurePolicy) {
    out.failurePolicy =
      s.failurePolicy.kind === 'drop'
        ? { drop: {} }
        : { constant: { interval: formatDuration(s.failurePolicy.intervalMs), ...(s.failurePolicy.maxRetries !== undefined ? { maxRetries: s.failurePolicy.maxRetries } : {}) } };
  }
  return out;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}
