/**
 * The jobs methods, on the jobs block's service (jobs/service.ts, the one its HTTP API uses:
 * name checks, the scheduler call, the error table's rows). Each is served under its stable
 * name (ScheduleJob, GetJob, …) and its Alpha1 name: the SDKs call the stable one first and
 * fall back to Alpha1 only on UNIMPLEMENTED, which cost every job call a second round trip. Job
 * data is kept as the Any that was sent (any.ts). Here the messages are decoded and encoded.
 */
import { ApiError } from '../../http/errors.ts';
import type { SidecarContext } from '../../context.ts';
import { jobInvalid, type JobsService } from '../../jobs/service.ts';
import type { FailurePolicy, JobRecord, JobSpec } from '../../../../scheduler/src/index.ts';
import { anyIn, anyOut, type AnyMsg } from './any.ts';

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

function policyIn(p: FailurePolicyMsg | null | undefined): FailurePolicy | undefined {
  if (!p) return undefined;
  if (p.drop) return { kind: 'drop' };
  if (p.constant) {
    const d = p.constant.interval;
    const intervalMs = d ? Number(d.seconds ?? 0) * 1000 + Math.floor(Number(d.nanos ?? 0) / 1e6) : 1000;
    if (!Number.isFinite(intervalMs) || intervalMs < 0) {
      throw jobInvalid('RT_SCHEDULER_FAILURE_POLICY_INVALID', 'failure_policy.constant.interval must not be negative');
    }
    return { kind: 'constant', intervalMs, maxRetries: p.constant.max_retries };
  }
  throw jobInvalid('RT_SCHEDULER_FAILURE_POLICY_INVALID', 'failure_policy must hold "drop" or "constant"');
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
  const jobs = (): JobsService => {
    const service = ctx.services.jobs;
    if (!service) throw new ApiError(501, 'ERR_API_UNIMPLEMENTED', 'the jobs building block is not running');
    return service;
  };

  const methods = {
    async ScheduleJob(req: { job: JobMsg | null; overwrite: boolean }): Promise<Record<string, never>> {
      if (!req.job) throw jobInvalid('RT_SCHEDULER_JOB_EMPTY', 'job is required: send {name, schedule and/or due_time, …}');
      await jobs().schedule(req.job.name, specOf(req.job), req.overwrite === true);
      return {};
    },

    async GetJob(req: { name: string }): Promise<{ job: JobMsg }> {
      return { job: jobMsg(await jobs().get(req.name)) };
    },

    async DeleteJob(req: { name: string }): Promise<Record<string, never>> {
      await jobs().delete(req.name);
      return {};
    },

    async ListJobs(): Promise<{ jobs: JobMsg[] }> {
      return { jobs: (await jobs().list()).map(jobMsg) };
    },

    async DeleteJobsByPrefix(req: { name_prefix?: string }): Promise<Record<string, never>> {
      await jobs().deleteByPrefix(req.name_prefix ?? '');
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
