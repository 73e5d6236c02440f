/**
 * The jobs HTTP API: POST/GET/DELETE /v1.0-alpha1/jobs/<name> (also under /v1.0), and
 * GET /v1.0-alpha1/jobs to list the app's jobs. Each route decodes (request.ts), calls the
 * operation of the jobs service (service.ts, shared with the gRPC API) and encodes the answer.
 * Statuses (the error table's rows): 204/200 on success, 400 for bad input, 409 when the job
 * exists without "overwrite", 500 for a missing job on GET and for scheduler failures (the
 * contract's table).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SidecarContext } from '../context.ts';
import { jobView, parseScheduleBody } from './request.ts';
import type { JobsService } from './service.ts';

const PREFIXES = ['/v1.0-alpha1/jobs', '/v1.0/jobs'];

export function registerJobRoutes(ctx: SidecarContext, jobs: JobsService): void {
  const nameOf = (req: FastifyRequest): string => (req.params as Record<string, string>)['*'] ?? '';

  for (const prefix of PREFIXES) {
    ctx.http.post(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      const { spec, overwrite } = parseScheduleBody(req.body);
      await jobs.schedule(nameOf(req), spec, overwrite);
      reply.status(204).send();
    });
    ctx.http.get(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      reply.status(200).send(jobView(await jobs.get(nameOf(req))));
    });
    ctx.http.delete(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
      await jobs.delete(nameOf(req));
      reply.status(204).send();
    });
    ctx.http.get(prefix, async (_req: FastifyRequest, reply: FastifyReply) => {
      reply.status(200).send({ jobs: (await jobs.list()).map(jobView) });
    });
  }
}
