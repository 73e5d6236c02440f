/**
 * The distributed lock HTTP API, as the ecosystem's SDKs call it:
 *   POST /v1.0-alpha1/lock/<store>    {resourceId, lockOwner, expiryInSeconds} → 200 {"success": bool}
 *   POST /v1.0-alpha1/unlock/<store>  {resourceId, lockOwner}                  → 200 {"status": 0..3}
 * The unlock status is the number of the reference runtime's enum (0 SUCCESS, 1
 * LOCK_DOES_NOT_EXIST, 2 LOCK_BELONGS_TO_OTHERS, 3 INTERNAL_ERROR), as its HTTP API answers and
 * the SDKs read it. Schemas: schemas.ts; the checks and errors: service.ts.
 */
import type { SidecarContext } from '../context.ts';
import { malformed } from '../http/errors.ts';
import { jsonOfAnyContentType } from '../http/schema.ts';
import * as schemas from './schemas.ts';
import type { LockService } from './service.ts';

interface Body {
  resourceId?: string;
  lockOwner?: string;
  expiryInSeconds?: number | string;
  resource_id?: string;
  lock_owner?: string;
  expiry_in_seconds?: number | string;
}

type Route = { Params: { storename: string }; Body: Body };

/** An int32 sent as a number or as its decimal text (protobuf JSON takes both); absent is 0. */
export function expiryOf(v: number | string | undefined): number {
  if (v === undefined) return 0;
  if (typeof v === 'number') return v;
  if (!/^\s*-?\d{1,12}\s*$/.test(v)) throw malformed(`"expiryInSeconds" must be a whole number of seconds; got "${v.slice(0, 40)}"`);
  return Number(v);
}

export function lockRoutes(ctx: SidecarContext, lock: LockService): void {
  // JSON bodies are read whatever their Content-Type (none, text/plain …), then checked by their schema
  const json = { preValidation: jsonOfAnyContentType };

  ctx.http.post<Route>('/v1.0-alpha1/lock/:storename', { schema: schemas.LOCK, ...json }, async (req) => {
    const b = req.body;
    return lock.tryLock(req.params.storename, {
      resourceId: b.resourceId ?? b.resource_id ?? '',
      lockOwner: b.lockOwner ?? b.lock_owner ?? '',
      expiryInSeconds: expiryOf(b.expiryInSeconds ?? b.expiry_in_seconds),
    });
  });

  ctx.http.post<Route>('/v1.0-alpha1/unlock/:storename', { schema: schemas.UNLOCK, ...json }, async (req) => {
    const b = req.body;
    return lock.unlock(req.params.storename, { resourceId: b.resourceId ?? b.resource_id ?? '', lockOwner: b.lockOwner ?? b.lock_owner ?? '' });
  });
}
