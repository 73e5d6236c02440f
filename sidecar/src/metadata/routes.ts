/** GET /v1.0/metadata and PUT /v1.0/metadata/<attributeName>. */
import type { SidecarContext } from '../context.ts';
import { ApiError, malformed } from '../http/errors.ts';
import { rawBodyRoutes } from '../http/server.ts';
import { requestShutdown } from '../shutdown.ts';

const ATTRIBUTE_NAME = /^[A-Za-z0-9._-]{1,256}$/;
const MAX_VALUE_BYTES = 64 * 1024;

export async function setup(ctx: SidecarContext): Promise<void> {
  ctx.http.get('/v1.0/metadata', async () => {
    try {
      return ctx.metadata.snapshot();
    } catch (e) {
      throw new ApiError(500, 'ERR_METADATA_GET', `metadata could not be returned: ${(e as Error).message}`);
    }
  });

  // the ecosystem's sidecar API: answer first, then stop gracefully
  ctx.http.post('/v1.0/shutdown', async (_req, reply) => {
    requestShutdown(ctx, 'HTTP API');
    return reply.status(204).send();
  });

  await rawBodyRoutes(ctx.http, (scope) => {
    scope.put<{ Params: { name: string } }>('/v1.0/metadata/:name', async (req, reply) => {
      const name = req.params.name;
      if (!ATTRIBUTE_NAME.test(name)) {
        throw malformed(`attribute name "${name.slice(0, 80)}" is not valid: use 1-256 letters, digits, '.', '_' or '-'`);
      }
      if (ctx.metadata.isReservedKey(name)) {
        throw malformed(`attribute "${name}" is set by the runtime and cannot be overwritten`);
      }
      const body = req.body === undefined || req.body === null ? Buffer.alloc(0) : (req.body as Buffer);
      if (body.length > MAX_VALUE_BYTES) throw malformed(`attribute value is ${body.length} bytes; the limit is ${MAX_VALUE_BYTES}`);
      ctx.metadata.setExtended(name, body.toString('utf8'));
      reply.status(204).send();
    });
  });
}
