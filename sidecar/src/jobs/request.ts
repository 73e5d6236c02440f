/**
 * The HTTP body of POST /v1.0-alpha1/jobs/<name> → a JobSpec. Only shapes are checked here
 * (types of the members); what the values mean is checked by the scheduler's validator.
 */
import { parseJsonText } from '../http/body.ts';
import { malformed } from '../http/errors.ts';
import { formatDuration, parseDuration } from '../util/duration.ts';
import type { FailurePolicy, JobRecord, JobSpec } from '../../../scheduler/src/types.ts';
import { dataView } from './data.ts';
import { jobInvalid as invalid } from './service.ts';

export interface ScheduleRequest {
  spec: JobSpec;
  overwrite: boolean;
}

const FIELD_HELP = 'send a JSON object with "schedule" and/or "dueTime", and optionally "data", "repeats", "ttl", "overwrite", "failurePolicy"';

export function parseScheduleBody(body: unknown): ScheduleRequest {
  let b = body;
  if (Buffer.isBuffer(b) || typeof b === 'string') {
    // non-JSON content types arrive raw (text/plain as a string); the body must still be JSON
    const text = b.toString('utf8');
    if (text.trim() === '') throw malformed(`the request body is empty: ${FIELD_HELP}`);
    b = parseJsonText(text, `the request body (${FIELD_HELP})`);
  }
  if (b === undefined || b === null) throw malformed(`the request body is empty: ${FIELD_HELP}`);
  if (typeof b !== 'object' || Array.isArray(b)) throw malformed(`the request body must be a JSON object, got ${Array.isArray(b) ? 'an array' : typeof b}: ${FIELD_HELP}`);
  let o = b as Record<string, unknown>;
  // earlier alpha clients wrapped the fields in {"job": {...}}
  const keys = Object.keys(o);
  if (keys.length === 1 && keys[0] === 'job' && typeof o.job === 'object' && o.job !== null && !Array.isArray(o.job)) o = o.job as Record<string, unknown>;

  const spec: JobSpec = {};
  const str = (field: 'schedule' | 'dueTime' | 'ttl', code: string) => {
    const v = o[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw invalid(code, `${field}: must be a string, got ${describe(v)}`);
    return v;
  };
  spec.schedule = str('schedule', 'RT_SCHEDULER_SCHEDULE_INVALID');
  spec.dueTime = str('dueTime', 'RT_SCHEDULER_DUE_TIME_INVALID');
  spec.ttl = str('ttl', 'RT_SCHEDULER_TTL_INVALID');
  if (o.repeats !== undefined && o.repeats !== null) {
    if (typeof o.repeats !== 'number' || !Number.isInteger(o.repeats)) {
      throw invalid('RT_SCHEDULER_REPEATS_INVALID', `repeats: must be a whole number from 1 to 2147483647, got ${describe(o.repeats)}`);
    }
    spec.repeats = o.repeats;
  }
  if (o.data !== undefined) spec.dataJson = JSON.stringify(o.data);
  if (o.failurePolicy !== undefined && o.failurePolicy !== null) spec.failurePolicy = parseFailurePolicy(o.failurePolicy);
  let overwrite = false;
  if (o.overwrite !== undefined && o.overwrite !== null) {
    if (typeof o.overwrite !== 'boolean') throw malformed(`overwrite: must be true or false, got ${describe(o.overwrite)}`);
    overwrite = o.overwrite;
  }
  for (const k of Object.keys(spec) as (keyof JobSpec)[]) if (spec[k] === undefined) delete spec[k];
  return { spec, overwrite };
}

/** {"drop": {}} or {"constant": {"interval": "5s", "maxRetries": 3}} (maxRetries absent = forever). */
function parseFailurePolicy(v: unknown): FailurePolicy {
  const code = 'RT_SCHEDULER_FAILURE_POLICY_INVALID';
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(code, `failurePolicy: must be {"drop": {}} or {"constant": {"interval": "1s", "maxRetries": 3}}, got ${describe(v)}`);
  const o = v as Record<string, unknown>;
  if ('drop' in o && 'constant' in o) throw invalid(code, 'failurePolicy: give either "drop" or "constant", not both');
  if ('drop' in o) return { kind: 'drop' };
  if (!('constant' in o)) throw invalid(code, 'failurePolicy: must hold "drop" or "constant"');
  const c = (o.constant ?? {}) as Record<string, unknown>;
  if (typeof c !== 'object' || Array.isArray(c)) throw invalid(code, `failurePolicy.constant: must be an object, got ${describe(o.constant)}`);
  let intervalMs = 1000;
  if (c.interval !== undefined && c.interval !== null) {
    const d = typeof c.interval === 'string' ? parseDuration(c.interval) : undefined;
    if (d === undefined || d < 0) throw invalid(code, `failurePolicy.constant.interval: must be a duration such as "1s" or "500ms", got ${describe(c.interval)}`);
    intervalMs = d;
  }
  let maxRetries: number | undefined;
  if (c.maxRetries !== undefined && c.maxRetries !== null) {
    if (typeof c.maxRetries !== 'number' || !Number.isInteger(c.maxRetries) || c.maxRetries < 0) {
      throw invalid(code, `failurePolicy.constant.maxRetries: must be a whole number of 0 or more, got ${describe(c.maxRetries)}`);
    }
    maxRetries = c.maxRetries;
  }
  return { kind: 'constant', intervalMs, maxRetries };
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
