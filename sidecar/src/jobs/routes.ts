/**
 * The jobs HTTP API: POST/GET/DELETE /v1.0-alpha1/jobs/<name> (also under /v1.0), and
 * GET /v1.0-alpha1/jobs to list the app's jobs. Statuses: 204/200 on success, 400 for bad
 * input, 409 when the job exists without "overwrite", 500 for a missing job on GET and for
 * scheduler failures (the contract's table).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SidecarContext } from '../context.ts';
import { ApiError } from '../http/errors.ts';
import type { SchedulerClient } from '../../../scheduler/src/client.ts';
import { JOB_OPERATION_ERROR_CODES, SchedulerError, type JobKey, type JobOperation } from '../../../scheduler/src/types.ts';
import { validateName, validateNewName } from '../../../scheduler/src/validate.ts';
import { jobView, parseScheduleBody } from './request.ts';

const PREFIXES = ['/v1.0-alpha1/jobs', '/v1.0/jobs'];

type Op = JobOperation;
const OP_CODES = JOB_OPERATION_ERROR_CODES;

/** `client` undefined: no scheduler configured (kubernetes mode without an address). */
export function registerJobRoutes(ctx: SidecarContext, client: SchedulerClient | undefined): void {
  const { appId, namespace } = ctx.options;
  const need = (op: Op): SchedulerClient => {
    if (client) return client;
    throw new ApiError(500, OP_CODES[op], 'the jobs API needs a scheduler: start the sidecar with --scheduler-host-address (no scheduler is configured in kubernetes mode)');
  };
  const keyOf = (req: FastifyRequest): JobKey => {
    const name = (req.params as Record<string, string>)['*'] ?? '';
    validateName(name);
    return { namespace, appId, owner: '', name };
  };

  for (const prefix of PREFIXES) {
    ctx.http.post(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      await run('schedule', async () => {
        const key = keyOf(req);
        validateNewName(key.name);
        const { spec, overwrite } = parseScheduleBody(req.body);
        await need('schedule').schedule(key, spec, overwrite);
      });
      reply.status(204).send();
    });
    ctx.http.get(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      const rec = await run('get', async () => need('get').get(keyOf(req)));
      reply.status(200).send(jobView(rec));
    });
    ctx.http.delete(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      await run('delete', async () => need('delete').delete(keyOf(req)));
      reply.status(204).send();
    });
    ctx.http.get(prefix, async (_req: FastifyRequest, reply: FastifyReply) => {
      const recs = await run('list', async () => need('list').list({ namespace, appId, owner: '' }));
      reply.status(200).send({ jobs: recs.map(jobView) });
    });
  }
}

/** Maps scheduler failures to the API's statuses. */
async function run<T>(op: Op, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (e instanceof SchedulerError) {
      switch (e.kind) {
        case 'invalid':
          throw new ApiError(400, e.errorCode, e.message);
        case 'exists':
          throw new ApiError(409, e.errorCode, e.message);
        case 'not_found':
          throw new ApiError(500, OP_CODES[op], e.message);
        default:
          throw new ApiError(500, OP_CODES[op], `scheduler: ${e.message}`);
      }
    }
    throw new ApiError(500, OP_CODES[op], `could not ${op} the job: ${(e as Error).message}`);
  }
}
