/**
 * A reminder registration as both transports send it → one ReminderRequest for the service.
 * Beyond the schedule texts (checked by schedule.ts) the reference runtime's newer fields:
 * - `overwrite`: absent or null = true (the reference's default, so older clients keep
 *   replacing); false = a reminder of that name must not exist yet;
 * - the failure policy, carried into the reminder's job (the scheduler retries or drops a fire
 *   the app fails by it): over HTTP `failurePolicy` (or `failure_policy`, the reference's JSON
 *   name) as the jobs API writes it, `{"drop": {}}` or `{"constant": {"interval": "1s",
 *   "maxRetries": 3}}`; over gRPC `dapr.proto.common.v1.JobFailurePolicy`.
 * Anything else is a 400 / INVALID_ARGUMENT naming the field, never a 5xx.
 */
import { parseDuration } from '../../../shared/duration.ts';
import type { FailurePolicy } from '../../../scheduler/src/index.ts';
import { ERRORS, failAs } from '../api/errors.ts';
import type { ApiError } from '../http/errors.ts';

/** What a registration says beyond its schedule. */
export interface ReminderOptions {
  /** false: refuse when a reminder of the name exists (absent or true: replace it). */
  overwrite?: boolean;
  /** Absent = the scheduler's default policy. */
  failurePolicy?: FailurePolicy;
}

export interface ReminderRequest extends ReminderOptions {
  dueTime?: string;
  period?: string;
  ttl?: string;
  data?: unknown;
  overwrite: boolean;
}

/** The gRPC JobFailurePolicy as proto-loader gives it (keepCase, oneofs, defaults). */
export interface FailurePolicyMsg {
  drop?: Record<string, never> | null;
  constant?: { interval?: { seconds?: number | string; nanos?: number } | null; max_retries?: number | null } | null;
}

const SHAPE = 'give {"drop": {}} or {"constant": {"interval": "1s", "maxRetries": 3}}';
/** A constant policy's interval when none is given: the jobs API's default. */
const DEFAULT_INTERVAL_MS = 1000;

export function invalidReminder(message: string): ApiError {
  return failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_REMINDER_CREATE', message);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The HTTP body (any JSON value; empty = undefined). */
export function reminderRequestOf(body: unknown): ReminderRequest {
  if (body === undefined || body === null) return { overwrite: true };
  if (!isObj(body)) throw invalidReminder(`the reminder body must be a JSON object, got ${describe(body)}`);
  const out: ReminderRequest = { overwrite: true };
  for (const f of ['dueTime', 'period', 'ttl'] as const) {
    const v = body[f];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw invalidReminder(`${f}: must be a string, got ${describe(v)}`);
    out[f] = v;
  }
  if (body.data !== undefined) out.data = body.data;
  const ow = body.overwrite;
  if (ow !== undefined && ow !== null) {
    if (typeof ow !== 'boolean') throw invalidReminder(`overwrite: must be true or false, got ${describe(ow)}`);
    out.overwrite = ow;
  }
  const [field, policy] = body.failurePolicy !== undefined && body.failurePolicy !== null ? ['failurePolicy', body.failurePolicy] : ['failure_policy', body.failure_policy];
  if (policy !== undefined && policy !== null) out.failurePolicy = failurePolicyOfJson(policy, field);
  return out;
}

/** `{"drop": {}}` or `{"constant": {"interval": "<Go duration>", "maxRetries": n}}` (maxRetries absent = forever). */
export function failurePolicyOfJson(v: unknown, field = 'failurePolicy'): FailurePolicy {
  if (!isObj(v)) throw invalidReminder(`${field}: must be an object, got ${describe(v)}; ${SHAPE}`);
  const kinds = Object.keys(v).filter((k) => v[k] !== undefined);
  const unknown = kinds.find((k) => k !== 'drop' && k !== 'constant');
  if (unknown !== undefined) throw invalidReminder(`${field}: "${clip(unknown)}" is not a failure policy; ${SHAPE}`);
  if (kinds.length !== 1) throw invalidReminder(`${field}: ${kinds.length === 0 ? 'holds no policy' : 'holds both drop and constant'}; ${SHAPE}`);
  if (kinds[0] === 'drop') {
    if (v.drop !== null && !isObj(v.drop)) throw invalidReminder(`${field}.drop: must be an object ({}), got ${describe(v.drop)}`);
    return { kind: 'drop' };
  }
  const c = v.constant ?? {};
  if (!isObj(c)) throw invalidReminder(`${field}.constant: must be an object, got ${describe(c)}`);
  let intervalMs = DEFAULT_INTERVAL_MS;
  if (c.interval !== undefined && c.interval !== null) {
    const ms = typeof c.interval === 'string' ? parseDuration(c.interval.trim()) : undefined;
    if (ms === undefined || ms < 0 || !Number.isFinite(ms)) throw invalidReminder(`${field}.constant.interval: must be a duration of 0s or more such as "1s" or "500ms", got ${describe(c.interval)}`);
    intervalMs = ms;
  }
  const retries = c.maxRetries ?? c.max_retries;
  if (retries === undefined || retries === null) return { kind: 'constant', intervalMs };
  if (typeof retries !== 'number' || !Number.isSafeInteger(retries) || retries < 0) throw invalidReminder(`${field}.constant.maxRetries: must be a whole number of 0 or more (leave it out to retry until the fire succeeds), got ${describe(retries)}`);
  return { kind: 'constant', intervalMs, maxRetries: retries };
}

/** The gRPC message's policy; null/undefined = none given. */
export function failurePolicyOfMsg(m: FailurePolicyMsg | null | undefined): FailurePolicy | undefined {
  if (!m) return undefined;
  if (m.drop && m.constant) throw invalidReminder(`failure_policy: holds both drop and constant; set one`);
  if (m.drop) return { kind: 'drop' };
  if (!m.constant) throw invalidReminder('failure_policy: holds no policy; set drop or constant');
  const d = m.constant.interval;
  let intervalMs = DEFAULT_INTERVAL_MS;
  if (d) {
    const seconds = Number(d.seconds ?? 0);
    const nanos = Number(d.nanos ?? 0);
    intervalMs = seconds * 1000 + Math.trunc(nanos / 1e6);
    if (!Number.isFinite(intervalMs) || seconds < 0 || nanos < 0) throw invalidReminder(`failure_policy.constant.interval: must not be negative, got ${seconds}s ${nanos}ns`);
  }
  const retries = m.constant.max_retries;
  return retries === undefined || retries === null ? { kind: 'constant', intervalMs } : { kind: 'constant', intervalMs, maxRetries: retries };
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `"${clip(v)}"`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${clip(String(v))}`;
}

function clip(s: string): string {
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}
