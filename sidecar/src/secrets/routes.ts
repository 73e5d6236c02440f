/**
 * The secrets HTTP API as the ecosystem's SDKs call it:
 *   GET /v1.0/secrets/<store>/<key>   → 200 {key: value, …}; 204 when the store has no such secret
 *   GET /v1.0/secrets/<store>/bulk    → 200 {secretName: {key: value}, …}
 * Request metadata comes as `metadata.<name>=<value>` query parameters. Values are never logged.
 */
import type { SidecarContext } from '../context.ts';
import { SecretsService } from './service.ts';

type Params = { Params: { store: string; key: string }; Querystring: Record<string, string | string[]> };

export async function setup(ctx: SidecarContext): Promise<void> {
  const secrets = new SecretsService(ctx.components);
  ctx.services.secrets = secrets;

  ctx.http.get<Params>('/v1.0/secrets/:store/bulk', async (req) => secrets.bulk(req.params.store, metadataOf(req.query)));

  ctx.http.get<Params>('/v1.0/secrets/:store/:key', async (req, reply) => {
    const secret = await secrets.get(req.params.store, req.params.key, metadataOf(req.query));
    if (!secret) return reply.status(204).send();
    return secret;
  });
}

function metadataOf(query: Record<string, string | string[]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query ?? {})) {
    if (!k.startsWith('metadata.')) continue;
    Object.defineProperty(out, k.slice('metadata.'.length), { value: Array.isArray(v) ? v[v.length - 1] : v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
