/**
 * Every schema the sidecar's HTTP routes declare, listed for the build, which compiles their
 * validators (images/validators.ts), and for the test that each registered route declares one
 * (test/http/openapi.test.ts). A block's routes take theirs from the block's `schemas.ts`; the
 * server's own (health, this document) are here.
 */
import { ACTORS_SCHEMAS } from '../actors/schemas.ts';
import { BINDINGS_SCHEMAS } from '../bindings/schemas.ts';
import { CONFIGURATION_SCHEMAS } from '../configuration/schemas.ts';
import { CRYPTO_SCHEMAS } from '../crypto/schemas.ts';
import { INVOKE_SCHEMAS } from '../invoke/schemas.ts';
import { JOBS_SCHEMAS } from '../jobs/schemas.ts';
import { LOCK_SCHEMAS } from '../lock/schemas.ts';
import { METADATA_SCHEMAS } from '../metadata/schemas.ts';
import { PUBSUB_SCHEMAS } from '../pubsub/schemas.ts';
import { SECRETS_SCHEMAS } from '../secrets/schemas.ts';
import { STATE_SCHEMAS } from '../state/schemas.ts';
import { WORKFLOWS_SCHEMAS } from '../workflows/schemas.ts';
import { route, type JsonSchema, type RouteSchema } from './schema.ts';

export const HEALTHZ = route('health.up', 'Is the sidecar up (answers without the API token)', {
  responses: { '204': 'up', '503': 'ERR_HEALTH_NOT_READY with the reasons (with mTLS: no usable workload certificate yet, or it expired)' },
});

export const HEALTHZ_OUTBOUND = route('health.outbound', "Do the sidecar's components answer (answers without the API token)", {
  responses: { '204': 'every component answers', '500': 'ERR_HEALTH_NOT_READY naming the ones that do not' },
});

export const OPENAPI = route('meta.openapi', 'This document: the OpenAPI 3.1 description of the HTTP API', { responses: { '200': 'the OpenAPI document' } });

export const ROUTE_SCHEMAS: RouteSchema[] = [HEALTHZ, HEALTHZ_OUTBOUND, OPENAPI, ...STATE_SCHEMAS, ...BINDINGS_SCHEMAS, ...JOBS_SCHEMAS, ...PUBSUB_SCHEMAS, ...SECRETS_SCHEMAS, ...INVOKE_SCHEMAS, ...CONFIGURATION_SCHEMAS, ...CRYPTO_SCHEMAS, ...LOCK_SCHEMAS, ...ACTORS_SCHEMAS, ...WORKFLOWS_SCHEMAS, ...METADATA_SCHEMAS];

/** The part schemas that are validated (those with an `$id`), once each. */
export function validatedSchemas(routes: RouteSchema[] = ROUTE_SCHEMAS): JsonSchema[] {
  const byId = new Map<string, JsonSchema>();
  for (const r of routes) {
    for (const part of [r.params, r.querystring, r.body, r['x-body']]) {
      if (!part || typeof part.$id !== 'string') continue;
      const seen = byId.get(part.$id);
      if (seen && seen !== part) throw new Error(`two schemas have the $id ${part.$id}`);
      byId.set(part.$id, part);
    }
  }
  return [...byId.values()];
}
