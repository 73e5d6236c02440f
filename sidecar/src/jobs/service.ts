/**
 * The jobs building block's API for both surfaces (HTTP routes.ts, gRPC grpc/runtime/jobs.ts),
 * one method per operation on the app's own jobs (owner ''): each checks the name with the
 * scheduler's validator, calls the scheduler client and turns every failure into a row of the
 * error table (api/errors.ts): invalid → 400/INVALID_ARGUMENT, exists → 409/ALREADY_EXISTS,
 * not found → 500 (the contract) / NOT_FOUND, no scheduler → 500/FAILED_PRECONDITION,
 * unavailable → 500/UNAVAILABLE, anything else → 500/INTERNAL with the operation's code.
 * What the transports decode (a JobSpec) is checked by the scheduler's validator on schedule.
 */
import { ERRORS, fail, failAs } from '../api/errors.ts';
import { ApiError, errorMessage } from '../http/errors.ts';
import { JOB_OPERATION_ERROR_CODES, type JobKey, type JobOperation, type JobRecord, type JobSpec, type SchedulerClient, SchedulerError, validateName, validateNewName } from '../../../scheduler/src/index.ts';

/** A request the scheduler would refuse, found while decoding it (400 / INVALID_ARGUMENT). */
export const jobInvalid = (code: string, message: string): ApiError => failAs(ERRORS.JOB_INVALID, code, message);

export class JobsService {
  /** undefined: no scheduler configured (kubernetes mode without an address). */
  readonly client: SchedulerClient | undefined;
  private readonly namespace: string;
  private readonly appId: string;

  constructor(client: SchedulerClient | undefined, namespace: string, appId: string) {
    this.client = client;
    this.namespace = namespace;
    this.appId = appId;
  }

  /** Creates the job, or replaces it with `overwrite`. */
  schedule(name: string, spec: JobSpec, overwrite: boolean): Promise<void> {
    return this.run('schedule', (client) => {
      const key = this.key(name);
      validateNewName(key.name);
      return client.schedule(key, spec, overwrite);
    });
  }

  get(name: string): Promise<JobRecord> {
    return this.run('get', (client) => client.get(this.key(name)));
  }

  /** Deletes the job; a missing one is no error. */
  delete(name: string): Promise<void> {
    return this.run('delete', (client) => client.delete(this.key(name)));
  }

  list(): Promise<JobRecord[]> {
    return this.run('list', (client) => client.list({ namespace: this.namespace, appId: this.appId, owner: '' }));
  }

  /** Deletes every job whose name starts with `prefix` ('' = all of the app's). */
  deleteByPrefix(prefix: string): Promise<void> {
    return this.run('delete', async (client) => {
      const recs = await client.list({ namespace: this.namespace, appId: this.appId, owner: '' });
      for (const rec of recs) if (rec.key.name.startsWith(prefix)) await client.delete(rec.key);
    });
  }

  private key(name: string): JobKey {
    validateName(name ?? '');
    return { namespace: this.namespace, appId: this.appId, owner: '', name };
  }

  private async run<T>(op: JobOperation, fn: (client: SchedulerClient) => Promise<T>): Promise<T> {
    const code = JOB_OPERATION_ERROR_CODES[op];
    try {
      if (!this.client) throw failAs(ERRORS.JOB_NO_SCHEDULER, code, 'the jobs API needs a scheduler: start the sidecar with --scheduler-host-address (no scheduler is configured in kubernetes mode)');
      return await fn(this.client);
    } catch (e) {
      throw jobFailure(e, op);
    }
  }
}

/** What the scheduler (or its client) threw, as a row of the error table. */
function jobFailure(e: unknown, op: JobOperation): ApiError {
  if (e instanceof ApiError) return e;
  const code = JOB_OPERATION_ERROR_CODES[op];
  if (e instanceof SchedulerError) {
    switch (e.kind) {
      case 'invalid':
        return failAs(ERRORS.JOB_INVALID, e.errorCode, e.message);
      case 'exists':
        return fail(ERRORS.JOB_EXISTS, e.message);
      case 'not_found':
        return failAs(ERRORS.JOB_NOT_FOUND, code, e.message);
      case 'unavailable':
        return failAs(ERRORS.JOB_SCHEDULER_UNAVAILABLE, code, `scheduler: ${e.message}`);
      default:
        return failAs(ERRORS.JOB_FAILED, code, `scheduler: ${e.message}`);
    }
  }
  return failAs(ERRORS.JOB_FAILED, code, `could not ${op} the job: ${errorMessage(e)}`);
}
