/**
 * The configuration HTTP API as the reference runtime serves it, under /v1.0 and /v1.0-alpha1:
 *   GET …/configuration/<store>?key=a&key=b        → 200 {key: item, …}; 204 when there is none
 *   GET …/configuration/<store>/subscribe?key=…    → 200 {"id": …}; changes go to the app (delivery.ts)
 *   GET …/configuration/<store>/<id>/unsubscribe   → 200 {"ok": true}
 * No key: every key. Request metadata comes as `metadata.<name>=<value>` query parameters.
 * Schemas: schemas.ts; the gRPC API shares the service (grpc/runtime/configuration.ts).
 */
import type { SidecarContext } from '../context.ts';
import { ERRORS, fail } from '../api/errors.ts';
import { malformed } from '../http/errors.ts';
import { queryMetadata } from '../http/query.ts';
import { appSink } from './delivery.ts';
import { itemsJson } from './items.ts';
import * as schemas from './schemas.ts';
import type { ConfigurationService } from './service.ts';

type Query = Record<string, string | string[]>;
type StoreParams = { Params: { store: string }; Querystring: Query };
type IdParams = { Params: { store: string; id: string } };

/** The `key` query parameters, in order. */
function queryKeys(q: Query): string[] {
  const v = Object.hasOwn(q, 'key') ? q.key : undefined;
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export function configurationRoutes(ctx: SidecarContext, svc: ConfigurationService): void {
  for (const version of ['v1.0', 'v1.0-alpha1']) {
    const base = `/${version}/configuration/:store`;

    ctx.http.get<StoreParams>(base, { schema: schemas.GET }, async (req, reply) => {
      const items = await svc.get({ store: req.params.store, keys: queryKeys(req.query), metadata: queryMetadata(req.query) ?? {} });
      if (Object.keys(items).length === 0) return reply.status(204).send();
      return itemsJson(items);
    });

    ctx.http.get<StoreParams>(`${base}/subscribe`, { schema: schemas.SUBSCRIBE }, async (req) => {
      const request = { store: req.params.store, keys: queryKeys(req.query), metadata: queryMetadata(req.query) ?? {} };
      // a wrong store is 400 whether or not there is an app
      svc.requireStore(request.store);
      if (!ctx.app.enabled) throw fail(ERRORS.CONFIGURATION_NO_APP, 'app channel is not initialized: an HTTP configuration subscription delivers its changes to the app (start the sidecar with an app port), or subscribe over gRPC');
      if (ctx.app.grpc) throw malformed('the app speaks gRPC: an HTTP configuration subscription delivers over HTTP; subscribe with the gRPC SubscribeConfiguration stream instead');
      const id = await svc.subscribe(request, appSink(ctx.app, request.store, ctx.log));
      return { id };
    });

    ctx.http.get<IdParams>(`${base}/:id/unsubscribe`, { schema: schemas.UNSUBSCRIBE }, async (req) => {
      await svc.unsubscribe(req.params.id, req.params.store);
      return { ok: true };
    });
  }
}
