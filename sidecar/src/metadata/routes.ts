/** GET /v1.0/metadata and PUT /v1.0/metadata/<attributeName>. */
import type { SidecarContext } from '../context.ts';
import { ApiError } from '../http/errors.ts';
import { rawBodyRoutes } from '../http/server.ts';
import { requestShutdown } from '../shutdown.ts';
import * as schemas from './schemas.ts';

export async function metadataRoutes(ctx: SidecarContext): Promise<void> {
  ctx.http.get('/v1.0/metadata', { schema: schemas.METADATA_GET }, async () => {
    try {
      return ctx.metadata.snapshot();
    } catch (e) {
      throw new ApiError(500, 'ERR_METADATA_GET', `metadata could not be returned: ${(e as Error).message}`);
    }
  });

  // the ecosystem's sidecar API: answer first, then stop gracefully
  ctx.http.post('/v1.0/shutdown', { schema: schemas.SHUTDOWN }, async (_req, reply) => {
    requestShutdown(ctx, 'HTTP API');
    return reply.status(204).send();
  });

  await rawBodyRoutes(ctx.http, (scope) => {
    scope.put<{ Params: { name: string } }>('/v1.0/metadata/:name', { schema: schemas.METADATA_PUT }, async (req, reply) => {
      const name = req.params.name;
      const body = req.body === undefined || req.body === null ? Buffer.alloc(0) : (req.body as Buffer);
      ctx.metadata.checkAttribute(name, body.length);
      ctx.metadata.setExtended(name, body.toString('utf8'));
      reply.status(204).send();
    });
  });
}
