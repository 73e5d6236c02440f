/**
 * The scheduler's front door: what the sidecar's jobs block uses (the job model, the client it
 * talks through, name checks, and the two ways to reach a scheduler). Other packages import the
 * scheduler from here only (test/build/front-doors.test.ts); everything else in scheduler/src is
 * the scheduler's own. Re-exports only, so importing it evaluates nothing the sidecar did not
 * already load.
 */
export type { FailurePolicy, JobDataAny, JobKey, JobOperation, JobRecord, JobSpec, Trigger } from './types.ts';
export { JOB_OPERATION_ERROR_CODES, SchedulerError } from './types.ts';
export type { SchedulerClient } from './client.ts';
export { validateName, validateNewName } from './validate.ts';
/** In-process, on a SQLite file (standalone without a scheduler address). */
export { startInProcessScheduler } from './embedded.ts';
/** `rt scheduler` hosts over gRPC. */
export { GrpcSchedulerClient } from './grpc/client.ts';
