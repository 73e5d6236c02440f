/**
 * The jobs methods, on the jobs block's scheduler client (the same one its HTTP API uses), for
 * the app's own jobs (owner ''). Each is served under its stable name (ScheduleJob, GetJob, …)
 * and its Alpha1 name: the SDKs call the stable one first and fall back to Alpha1 only on
 * UNIMPLEMENTED, which cost every job call a second round trip. Job data is kept as the Any
 * that was sent (any.ts). Names and specs are checked by the scheduler's validator;
 * failures map from SchedulerError kinds: invalid → INVALID_ARGUMENT, exists → ALREADY_EXISTS,
 * not_found → NOT_FOUND (the HTTP API answers 500 there, as its contract says; gRPC callers
 * get the precise code), unavailable → UNAVAILABLE, anything else → INTERNAL.
 */
import * as grpc from '@grpc/grpc-js';
import type { SidecarContext } from '../../context.ts';
import type { SchedulerClient } from '../../../../scheduler/src/client.ts';
import { JOB_OPERATION_ERROR_CODES, SchedulerError, type FailurePolicy, type JobKey, type JobOperation, type JobRecord, type JobSpec } from '../../../../scheduler/src/types.ts';
import { validateName, validateNewName } from '../../../../scheduler/src/validate.ts';
import { anyIn, anyOut, type AnyMsg } from './any.ts';
import { GrpcError } from './errors.ts';

interface DurationMsg {
  seconds: number;
  nanos: number;
}
interface FailurePolicyMsg {
  drop?: Record<string, never> | null;
  constant?: { interval?: DurationMsg | null; max_retries?: number } | null;
  policy?: string;
}
export interface JobMsg {
  name: string;
  schedule?: string;
  repeats?: number;
  due_time?: string;
  ttl?: string;
  data?: AnyMsg | null;
  failure_policy?: FailurePolicyMsg | null;
}

const CODES: Record<SchedulerError['kind'], grpc.status> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  exists: grpc.status.ALREADY_EXISTS,
  not_found: grpc.status.NOT_FOUND,
  unavailable: grpc.status.UNAVAILABLE,
  internal: grpc.status.INTERNAL,
};

type Op = JobOperation;
const OP_CODES = JOB_OPERATION_ERROR_CODES;

async function run<T>(op: Op, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof SchedulerError) throw new GrpcError(CODES[e.kind], e.kind === 'invalid' || e.kind === 'exists' ? e.errorCode : OP_CODES[op], e.message);
    throw e;
  }
}

function policyIn(p: FailurePolicyMsg | null | undefined): FailurePolicy | undefined {
  if (!p) return undefined;
  if (p.drop) return { kind: 'drop' };
  if (p.constant) {
    const d = p.constant.interval;
    const intervalMs = d ? Number(d.seconds ?? 0) * 1000 + Math.floor(Number(d.nanos ?? 0) / 1e6) : 1000;
    if (!Number.isFinite(intervalMs) || intervalMs < 0) {
      throw new GrpcError(grpc.status.INVALID_ARGUMENT, 'RT_SCHEDULER_FAILURE_POLICY_INVALID', 'failure_policy.constant.interval must not be negative');
    }
    return { kind: 'constant', intervalMs, maxRetries: p.constant.max_retries };
  }
  throw new GrpcError(grpc.status.INVALID_ARGUMENT, 'RT_SCHEDULER_FAILURE_POLICY_INVALID', 'failure_policy must hold "drop" or "constant"');
}

function policyOut(p: FailurePolicy | undefined): FailurePolicyMsg | undefined {
  if (!p) return undefined;
  if (p.kind === 'drop') return { drop: {} };
  const seconds = Math.floor(p.intervalMs / 1000);
  return { constant: { interval: { seconds, nanos: (p.intervalMs - seconds * 1000) * 1e6 }, max_retries: p.maxRetries } };
}

export function specOf(job: JobMsg): JobSpec {
  const spec: JobSpec = {};
  if (job.schedule !== undefined) spec.schedule = job.schedule;
  if (job.due_time !== undefined) spec.dueTime = job.due_time;
  if (job.ttl !== undefined) spec.ttl = job.ttl;
  if (job.repeats !== undefined) spec.repeats = job.repeats;
  const data = anyIn(job.data);
  if (data !== undefined) spec.dataAny = data;
  const policy = policyIn(job.failure_policy);
  if (policy) spec.failurePolicy = policy;
  return spec;
}

export function jobMsg(rec: JobRecord): JobMsg {
  const s = rec.spec;
  const out: JobMsg = { name: rec.key.name, data: anyOut(s) };
  if (s.schedule !== undefined) out.schedule = s.schedule;
  if (s.dueTime !== undefined) out.due_time = s.dueTime;
  if (s.repeats !== undefined) out.repeats = s.repeats;
  if (s.ttl !== undefined) out.ttl = s.ttl;
  const policy = policyOut(s.failurePolicy);
  if (policy) out.failure_policy = policy;
  return out;
}

export function jobMethods(ctx: SidecarContext) {
  const { namespace, appId } = ctx.options;
  const need = (op: Op): SchedulerClient => {
    const client = ctx.services.jobs;
    if (client) return client;
    throw new GrpcError(grpc.status.FAILED_PRECONDITION, OP_CODES[op], 'the jobs API needs a scheduler: start the sidecar with --scheduler-host-address (no scheduler is configured in kubernetes mode)');
  };
  const keyOf = (name: string): JobKey => {
    validateName(name ?? '');
    return { namespace, appId, owner: '', name };
  };

  const methods = {
    async ScheduleJob(req: { job: JobMsg | null; overwrite: boolean }): Promise<Record<string, never>> {
      await run('schedule', async () => {
        if (!req.job) throw new GrpcError(grpc.status.INVALID_ARGUMENT, 'RT_SCHEDULER_JOB_EMPTY', 'job is required: send {name, schedule and/or due_time, …}');
        const key = keyOf(req.job.name);
        validateNewName(key.name);
        await need('schedule').schedule(key, specOf(req.job), req.overwrite === true);
      });
      return {};
    },

    async GetJob(req: { name: string }): Promise<{ job: JobMsg }> {
      const rec = await run('get', async () => need('get').get(keyOf(req.name)));
      return { job: jobMsg(rec) };
    },

    async DeleteJob(req: { name: string }): Promise<Record<string, never>> {
      await run('delete', async () => need('delete').delete(keyOf(req.name)));
      return {};
    },

    async ListJobs(): Promise<{ jobs: JobMsg[] }> {
      const recs = await run('list', async () => need('list').list({ namespace, appId, owner: '' }));
      return { jobs: recs.map(jobMsg) };
    },

    async DeleteJobsByPrefix(req: { name_prefix?: string }): Promise<Record<string, never>> {
      const prefix = req.name_prefix ?? '';
      await run('delete', async () => {
        const client = need('delete');
        const recs = await client.list({ namespace, appId, owner: '' });
        for (const rec of recs) if (rec.key.name.startsWith(prefix)) await client.delete(rec.key);
      });
      return {};
    },
  };
  // the Alpha1 names (deprecated by the reference runtime, still what older SDKs call) take
  // the same requests and answer the same messages
  return {
    ...methods,
    ScheduleJobAlpha1: methods.ScheduleJob,
    GetJobAlpha1: methods.GetJob,
    DeleteJobAlpha1: methods.DeleteJob,
    ListJobsAlpha1: methods.ListJobs,
    DeleteJobsByPrefixAlpha1: methods.DeleteJobsByPrefix,
  };
}
