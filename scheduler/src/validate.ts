/**
 * Turns a caller's job into a stored record, or says exactly which field is wrong.
 * The sidecar calls this before sending (fast 400s) and the scheduler again on receipt
 * (it cannot trust every client).
 */
import { parseSchedule, nextAfter, type Schedule } from './schedule.ts';
import { TOO_FAR, clip, isStorableInstant, parseTimeValue } from './times.ts';
import { invalid, MAX_DATA_BYTES, MAX_JOB_NAME, type FailurePolicy, type JobKey, type JobRecord, type JobSpec } from './types.ts';

/** Characters a job name may not hold: path separators, URL delimiters, control characters. */
const BAD_NAME_CHAR = /[/\\#?\u0000-\u001f\u007f]/;

export function validateName(name: string, field = 'name'): void {
  if (name === '') throw invalid('RT_SCHEDULER_JOB_NAME_EMPTY', `job ${field} is empty: give the job a name in the path, e.g. /v1.0-alpha1/jobs/my-job`);
  if (name.length > MAX_JOB_NAME) throw invalid('RT_SCHEDULER_JOB_NAME', `job ${field} is ${name.length} characters long; the limit is ${MAX_JOB_NAME}`);
  // "." and ".." are path steps: URL normalisation turns /job/.. into something else
  if (name === '.' || name === '..') throw invalid('RT_SCHEDULER_JOB_NAME', `job ${field} "${name}" is not allowed: it is a path step in URLs`);
  const bad = BAD_NAME_CHAR.exec(name);
  if (bad) {
    const ch = bad[0];
    const shown = ch.charCodeAt(0) < 0x20 || ch === '\u007f' ? `control character U+${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : `"${ch}"`;
    throw invalid('RT_SCHEDULER_JOB_NAME', `job ${field} "${clip(name)}" contains ${shown}; names may not contain / \\ # ? or control characters`);
  }
}

/**
 * What a name being scheduled must also satisfy, beyond validateName: no "|", which the reference
 * runtime refuses (it separates the parts of its keys). Checked when a job is scheduled only, so
 * one stored before stays readable and deletable.
 */
export function validateNewName(name: string): void {
  if (name.includes('|')) throw invalid('RT_SCHEDULER_JOB_NAME', `job name "${clip(name)}" contains "|", which job names may not contain`);
}

export function validateKey(key: JobKey): void {
  validateName(key.name);
  if (!key.appId) throw invalid('RT_SCHEDULER_APP_ID', 'app id is empty');
  if (!key.namespace) throw invalid('RT_SCHEDULER_NAMESPACE', 'namespace is empty');
}

/** Validates a spec and computes the first fire and the expiry. `now` is the creation time. */
export function buildRecord(key: JobKey, spec: JobSpec, now: number, gen: string): JobRecord {
  validateKey(key);
  const hasSchedule = spec.schedule !== undefined && spec.schedule.trim() !== '';
  const hasDue = spec.dueTime !== undefined && spec.dueTime.trim() !== '';
  if (!hasSchedule && !hasDue) {
    throw invalid('RT_SCHEDULER_SCHEDULE_EMPTY', 'the job needs "schedule" or "dueTime" (or both): e.g. "schedule": "@every 10s" or "dueTime": "30s"');
  }
  let schedule: Schedule | undefined;
  if (hasSchedule) {
    const p = parseSchedule(spec.schedule!);
    if (!p.ok) throw invalid('RT_SCHEDULER_SCHEDULE_INVALID', `schedule: ${p.reason}`);
    schedule = p.schedule;
  }
  let dueAt: number | undefined;
  if (hasDue) {
    const t = parseTimeValue(spec.dueTime!, now);
    if (!t.ok) throw invalid('RT_SCHEDULER_DUE_TIME_INVALID', `dueTime: ${t.reason}`);
    dueAt = t.at;
  }
  let expiresAt: number | undefined;
  if (spec.ttl !== undefined) {
    const t = parseTimeValue(spec.ttl, now);
    if (!t.ok) throw invalid('RT_SCHEDULER_TTL_INVALID', `ttl: ${t.reason}`);
    if (t.at <= now) throw invalid('RT_SCHEDULER_TTL_INVALID', `ttl: "${clip(spec.ttl)}" is already past; the job would expire before it is created`);
    if (dueAt !== undefined && t.at < dueAt) throw invalid('RT_SCHEDULER_TTL_INVALID', `ttl: "${clip(spec.ttl)}" ends before dueTime "${clip(spec.dueTime!)}"`);
    expiresAt = t.at;
  }
  if (spec.repeats !== undefined && (!Number.isSafeInteger(spec.repeats) || spec.repeats < 1 || spec.repeats > 2 ** 31 - 1)) {
    throw invalid('RT_SCHEDULER_REPEATS_INVALID', `repeats: ${String(spec.repeats)} is not allowed; use a whole number from 1 to 2147483647, or leave it out to repeat until ttl`);
  }
  if (spec.dataJson !== undefined && Buffer.byteLength(spec.dataJson) > MAX_DATA_BYTES) {
    throw invalid('RT_SCHEDULER_DATA_INVALID', `data: ${Buffer.byteLength(spec.dataJson)} bytes as JSON; the limit is ${MAX_DATA_BYTES}`);
  }
  if (spec.dataAny !== undefined) {
    const bad = badDataAny(spec);
    if (bad) throw invalid('RT_SCHEDULER_DATA_INVALID', `data: ${bad}`);
    const size = Buffer.byteLength(spec.dataAny.value, 'base64') + Buffer.byteLength(spec.dataAny.typeUrl);
    if (size > MAX_DATA_BYTES) throw invalid('RT_SCHEDULER_DATA_INVALID', `data: ${size} bytes (type_url and value); the limit is ${MAX_DATA_BYTES}`);
  }
  if (spec.failurePolicy) validateFailurePolicy(spec.failurePolicy);
  const first = dueAt ?? nextAfter(schedule!, now);
  if (first !== null && !isStorableInstant(first)) throw invalid('RT_SCHEDULER_SCHEDULE_INVALID', `schedule: "${clip(spec.schedule ?? '')}" first fires too late; ${TOO_FAR}`);
  return { key, spec, createdAt: now, gen, count: 0, nextAt: first, expiresAt };
}

export function validateFailurePolicy(p: FailurePolicy): void {
  if (p.kind === 'drop') return;
  if (!Number.isFinite(p.intervalMs) || p.intervalMs < 0 || p.intervalMs > 366 * 86_400_000) {
    throw invalid('RT_SCHEDULER_FAILURE_POLICY_INVALID', 'failurePolicy.constant.interval: must be a duration from 0s to 8784h');
  }
  if (p.maxRetries !== undefined && (!Number.isSafeInteger(p.maxRetries) || p.maxRetries < 0 || p.maxRetries > 2 ** 31 - 1)) {
    throw invalid('RT_SCHEDULER_FAILURE_POLICY_INVALID', `failurePolicy.constant.maxRetries: ${String(p.maxRetries)} is not a whole number from 0 to 2147483647`);
  }
}

/**
 * The fire after the one due at `prevAt`, given how many have completed; null = the job is done.
 * Missed fires are not skipped: the next one follows the previous due time, not the clock.
 */
export function nextFire(rec: JobRecord, prevAt: number): number | null {
  const { spec } = rec;
  if (spec.repeats !== undefined && rec.count >= spec.repeats) return null;
  if (spec.schedule === undefined || spec.schedule.trim() === '') return null;
  const p = parseSchedule(spec.schedule);
  if (!p.ok) return null;
  const next = nextAfter(p.schedule, prevAt);
  if (next === null || !isStorableInstant(next)) return null;
  if (rec.expiresAt !== undefined && next > rec.expiresAt) return null;
  return next;
}

/**
 * Why a record read back from a store cannot be run (undefined: it can). Such a record is
 * quarantined by the store and logged; it must never stop the other jobs from loading.
 */
export function unloadable(rec: JobRecord): string | undefined {
  try {
    return whyUnloadable(rec);
  } catch (e) {
    // a field of the wrong type (a hand-edited or corrupt store) throws on use
    return (e as Error).message;
  }
}

function whyUnloadable(rec: JobRecord): string | undefined {
  validateKey(rec.key);
  const { spec } = rec;
  if (typeof spec !== 'object' || spec === null) return 'the stored spec is not an object';
  if (!isStorableInstant(rec.createdAt)) return `createdAt ${String(rec.createdAt)} is not a time a job can hold`;
  if (!Number.isSafeInteger(rec.count) || rec.count < 0) return `count ${String(rec.count)} is not a whole number`;
  if (rec.nextAt !== null && !isStorableInstant(rec.nextAt)) return `the next fire ${String(rec.nextAt)} is out of bounds: ${TOO_FAR}`;
  if (rec.expiresAt !== undefined && !isStorableInstant(rec.expiresAt)) return `the ttl ${String(rec.expiresAt)} is out of bounds: ${TOO_FAR}`;
  if (spec.schedule !== undefined && spec.schedule.trim() !== '') {
    const p = parseSchedule(spec.schedule);
    if (!p.ok) return `schedule: ${p.reason}`;
  }
  if (spec.dataJson !== undefined) {
    try {
      JSON.parse(spec.dataJson);
    } catch {
      return 'the stored data is not JSON';
    }
  }
  if (spec.dataAny !== undefined) {
    const bad = badDataAny(spec);
    if (bad) return `the stored data: ${bad}`;
  }
  return undefined;
}

/** What is wrong with a spec's dataAny (undefined: nothing): our own code writes it, a store may hold anything. */
function badDataAny(spec: JobSpec): string | undefined {
  const a = spec.dataAny as unknown;
  if (typeof a !== 'object' || a === null) return 'dataAny must be {typeUrl, value}';
  const { typeUrl, value } = a as Record<string, unknown>;
  if (typeof typeUrl !== 'string' || typeof value !== 'string') return 'dataAny must be {typeUrl: string, value: base64 string}';
  // canonical base64 only, so the bytes read back are the bytes written
  if (Buffer.from(value, 'base64').toString('base64') !== value) return 'dataAny.value is not base64';
  if (spec.dataJson !== undefined) return 'a job holds either JSON data or an Any, not both';
  return undefined;
}
