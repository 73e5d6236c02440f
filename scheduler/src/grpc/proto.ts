/** Loads scheduler.proto and converts between its messages and the scheduler's types. */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../../shared/proto-libs.ts';
import { SchedulerError, type FailurePolicy, type JobDataAny, type JobKey, type JobRecord, type JobSpec, type SchedulerErrorKind, type Trigger } from '../types.ts';

/** Metadata key that carries the scheduler token (when the scheduler has one). */
export const TOKEN_METADATA = 'rt-scheduler-token';

let cached: grpc.ServiceClientConstructor | undefined;

/** The generated-at-runtime client constructor; `.service` is the server definition. */
export function schedulerService(): grpc.ServiceClientConstructor {
  if (cached) return cached;
  const file = fileURLToPath(new URL('../../proto/scheduler.proto', import.meta.url));
  const def = protoLoader().loadSync(file, { keepCase: false, longs: Number, enums: String, defaults: false, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { rt: { scheduler: { v1: { Scheduler: grpc.ServiceClientConstructor } } } };
  cached = pkg.rt.scheduler.v1.Scheduler;
  return cached;
}

export interface PbKey {
  namespace?: string;
  appId?: string;
  owner?: string;
  name?: string;
}

export interface PbJob {
  schedule?: string;
  dueTime?: string;
  repeats?: number;
  ttl?: string;
  dataJson?: string;
  dataAny?: PbData | null;
  failurePolicy?: { drop?: object; constant?: { intervalMs?: number; maxRetries?: number } };
}

/** JobData: an Any's bytes travel as bytes on the wire, base64 in a JobSpec. */
export interface PbData {
  typeUrl?: string;
  value?: Uint8Array;
}

const toPbData = (d: JobDataAny | undefined): PbData | undefined => (d ? { typeUrl: d.typeUrl, value: Buffer.from(d.value, 'base64') } : undefined);

function fromPbData(p: PbData | null | undefined): JobDataAny | undefined {
  if (!p) return undefined;
  const v = p.value ?? new Uint8Array(0);
  return { typeUrl: p.typeUrl ?? '', value: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
}

export interface PbRecord {
  key?: PbKey;
  job?: PbJob;
  createdAtMs?: number;
  count?: number;
  nextAtMs?: number;
  expiresAtMs?: number;
  gen?: string;
}

export interface PbTrigger {
  id: string;
  key: PbKey;
  dataJson?: string;
  dataAny?: PbData | null;
  dueAtMs: number;
  attempt: number;
}

export const toKey = (k: PbKey | undefined): JobKey => ({ namespace: k?.namespace ?? '', appId: k?.appId ?? '', owner: k?.owner ?? '', name: k?.name ?? '' });

export function toPbJob(s: JobSpec): PbJob {
  const out: PbJob = { schedule: s.schedule, dueTime: s.dueTime, repeats: s.repeats, ttl: s.ttl, dataJson: s.dataJson, dataAny: toPbData(s.dataAny) };
  if (s.failurePolicy) out.failurePolicy = s.failurePolicy.kind === 'drop' ? { drop: {} } : { constant: { intervalMs: s.failurePolicy.intervalMs, maxRetries: s.failurePolicy.maxRetries } };
  return out;
}

export function fromPbJob(j: PbJob | undefined): JobSpec {
  const s: JobSpec = {};
  if (!j) return s;
  if (j.schedule !== undefined && j.schedule !== null) s.schedule = j.schedule;
  if (j.dueTime !== undefined && j.dueTime !== null) s.dueTime = j.dueTime;
  if (j.repeats !== undefined && j.repeats !== null) s.repeats = Number(j.repeats);
  if (j.ttl !== undefined && j.ttl !== null) s.ttl = j.ttl;
  if (j.dataJson !== undefined && j.dataJson !== null) s.dataJson = j.dataJson;
  const data = fromPbData(j.dataAny);
  if (data) s.dataAny = data;
  const fp = j.failurePolicy;
  let policy: FailurePolicy | undefined;
  if (fp?.drop) policy = { kind: 'drop' };
  else if (fp?.constant) {
    policy = { kind: 'constant', intervalMs: Number(fp.constant.intervalMs ?? 0) };
    if (fp.constant.maxRetries !== undefined && fp.constant.maxRetries !== null) policy.maxRetries = Number(fp.constant.maxRetries);
  }
  if (policy) s.failurePolicy = policy;
  return s;
}

export const toPbRecord = (r: JobRecord): PbRecord => ({
  key: r.key,
  job: toPbJob(r.spec),
  createdAtMs: r.createdAt,
  count: r.count,
  nextAtMs: r.nextAt ?? undefined,
  expiresAtMs: r.expiresAt,
  gen: r.gen,
});

export const fromPbRecord = (p: PbRecord): JobRecord => ({
  key: toKey(p.key),
  spec: fromPbJob(p.job),
  createdAt: Number(p.createdAtMs ?? 0),
  gen: p.gen ?? '',
  count: Number(p.count ?? 0),
  nextAt: p.nextAtMs === undefined || p.nextAtMs === null ? null : Number(p.nextAtMs),
  expiresAt: p.expiresAtMs === undefined || p.expiresAtMs === null ? undefined : Number(p.expiresAtMs),
});

export const toPbTrigger = (t: Trigger): PbTrigger => ({ id: t.id, key: t.key, dataJson: t.dataJson, dataAny: toPbData(t.dataAny), dueAtMs: t.dueAt, attempt: t.attempt });

export const fromPbTrigger = (p: PbTrigger): Trigger => ({
  id: p.id,
  key: toKey(p.key),
  dataJson: p.dataJson ?? undefined,
  dataAny: fromPbData(p.dataAny),
  dueAt: Number(p.dueAtMs ?? 0),
  attempt: Number(p.attempt ?? 0),
});

// SchedulerError kinds travel as gRPC status codes, the error code as metadata
const KIND_TO_CODE: Record<SchedulerErrorKind, grpc.status> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  exists: grpc.status.ALREADY_EXISTS,
  not_found: grpc.status.NOT_FOUND,
  unavailable: grpc.status.UNAVAILABLE,
  internal: grpc.status.INTERNAL,
};

export function toServiceError(e: unknown): Partial<grpc.StatusObject> {
  const md = new grpc.Metadata();
  if (e instanceof SchedulerError) {
    md.set('rt-error-code', e.errorCode);
    return { code: KIND_TO_CODE[e.kind], details: e.message, metadata: md };
  }
  return { code: grpc.status.INTERNAL, details: (e as Error)?.message ?? String(e), metadata: md };
}

export function fromServiceError(e: grpc.ServiceError, fallbackCode: string): SchedulerError {
  const code = (e.metadata?.get('rt-error-code')[0] as string | undefined) ?? fallbackCode;
  const kind: SchedulerErrorKind =
    e.code === grpc.status.INVALID_ARGUMENT ? 'invalid' : e.code === grpc.status.ALREADY_EXISTS ? 'exists' : e.code === grpc.status.NOT_FOUND ? 'not_found' : e.code === grpc.status.UNAVAILABLE ? 'unavailable' : 'internal';
  return new SchedulerError(kind, code, e.details || e.message);
}
