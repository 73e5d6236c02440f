/**
 * The scheduler's front door: what the sidecar's jobs block uses (the job model, the client it
 * talks through, name checks, and the two ways to reach a scheduler), and what the `rt` command
 * starts (the scheduler `rt run` embeds, `rt scheduler`). Other packages import the scheduler
 * from here only (test/build/front-doors.test.ts); everything else in scheduler/src is the
 * scheduler's own. Re-exports only: of what it evaluates, the sidecar does not load anyway only
 * the gRPC server's module (`rt scheduler`'s code loads when the command runs).
 */
export type { FailurePolicy, JobDataAny, JobKey, JobOperation, JobRecord, JobSpec, Trigger } from './types.ts';
export { JOB_OPERATION_ERROR_CODES, SchedulerError } from './types.ts';
export type { SchedulerClient } from './client.ts';
export { validateName, validateNewName } from './validate.ts';
/** In-process, on a SQLite file (standalone without a scheduler address). */
export { startInProcessScheduler } from './embedded.ts';
/** `rt scheduler` hosts over gRPC. */
export { GrpcSchedulerClient } from './grpc/client.ts';
/** `rt run` hosts one in its process, over gRPC on loopback, on the app's SQLite file (cli/embedded.ts). */
export { embeddedStorePath, startEmbeddedEngine } from './embedded.ts';
export { startSchedulerServer } from './grpc/server.ts';
/** `rt scheduler` (cli/commands.ts); its code loads when it runs. */
export { schedulerCommand } from './command.ts';
