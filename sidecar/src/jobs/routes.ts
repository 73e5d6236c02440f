/**
 * The jobs HTTP API: POST/GET/DELETE /v1.0-alpha1/jobs/<name> (also under /v1.0), and
 * GET /v1.0-alpha1/jobs to list the app's jobs. Each route declares its schema (schemas.ts),
 * decodes (request.ts), calls the operation of the jobs service (service.ts, shared with the
 * gRPC API) and encodes the answer. Statuses (the error table's rows): 204/200 on success, 400
 * for bad input, 409 when the job exists without "overwrite", 500 for a missing job on GET and
 * for scheduler failures (the contract's table).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SidecarContext } from '../context.ts';
import { jsonOfAnyContentType } from '../http/schema.ts';
import { jobView, scheduleRequestOf } from './request.ts';
import * as schemas from './schemas.ts';
import type { JobsService } from './service.ts';

const PREFIXES = ['/v1.0-alpha1/jobs', '/v1.0/jobs'];

type Named = { Params: { '*': string } };

export function registerJobRoutes(ctx: SidecarContext, jobs: JobsService): void {
  for (const prefix of PREFIXES) {
    // the body is read as JSON whatever its Content-Type, then checked by its schema
    ctx.http.post<Named>(`${prefix}/*`, { schema: schemas.SCHEDULE, preValidation: jsonOfAnyContentType }, async (req, reply) => {
      const { spec, overwrite } = scheduleRequestOf(req.body as Parameters<typeof scheduleRequestOf>[0]);
      await jobs.schedule(req.params['*'], spec, overwrite);
      reply.status(204).send();
    });
    ctx.http.get<Named>(`${prefix}/*`, { schema: schemas.GET }, async (req, reply) => {
      reply.status(200).send(jobView(await jobs.get(req.params['*'])));
    });
    ctx.http.delete<Named>(`${prefix}/*`, { schema: schemas.DELETE }, async (req, reply) => {
      await jobs.delete(req.params['*']);
      reply.status(204).send();
    });
    ctx.http.get(prefix, { schema: schemas.LIST }, async (_req: FastifyRequest, reply: FastifyReply) => {
      reply.status(200).send({ jobs: (await jobs.list()).map(jobView) });
    });
  }
}
