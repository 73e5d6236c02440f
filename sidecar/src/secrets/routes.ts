/**
 * The secrets HTTP API as the ecosystem's SDKs call it:
 *   GET /v1.0/secrets/<store>/<key>   → 200 {key: value, …}; 204 when the store has no such secret
 *   GET /v1.0/secrets/<store>/bulk    → 200 {secretName: {key: value}, …}
 * Request metadata comes as `metadata.<name>=<value>` query parameters (http/query.ts). Values
 * are never logged. Schemas: schemas.ts.
 */
import type { SidecarContext } from '../context.ts';
import { queryMetadata } from '../http/query.ts';
import * as schemas from './schemas.ts';
import type { SecretsService } from './service.ts';

type Params = { Params: { store: string; key: string }; Querystring: Record<string, string | string[]> };

export function secretsRoutes(ctx: SidecarContext, secrets: SecretsService): void {
  ctx.http.get<Params>('/v1.0/secrets/:store/bulk', { schema: schemas.BULK }, async (req) => secrets.bulk(req.params.store, queryMetadata(req.query) ?? {}));

  ctx.http.get<Params>('/v1.0/secrets/:store/:key', { schema: schemas.GET }, async (req, reply) => {
    const secret = await secrets.get(req.params.store, req.params.key, queryMetadata(req.query) ?? {});
    if (!secret) return reply.status(204).send();
    return secret;
  });
}
