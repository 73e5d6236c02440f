/**
 * The distributed lock HTTP routes' schemas (http/schema.ts): the members' types. What the values
 * mean (an id and an owner present, an expiry above 0) the lock service checks, for gRPC too.
 * The reference runtime reads these bodies as protobuf JSON, which takes the proto's field names
 * (`resource_id`, …) as well as the JSON ones, and an int32 as a number or a string: so do we.
 */
import { route, type JsonSchema } from '../http/schema.ts';

const STORE = { storename: 'the lock store component' };
const RESOURCE: JsonSchema = { type: 'string', description: 'the resource to lock: any text without "||"' };
const OWNER: JsonSchema = { type: 'string', description: 'who holds the lock: a value unique to each holder' };
const EXPIRY: JsonSchema = { type: ['integer', 'string'], description: 'seconds until the lock frees itself (1 or more)' };

export const LOCK = route('lock.lock', 'Take a distributed lock when nobody holds it (alpha)', {
  params: STORE,
  body: {
    type: 'object',
    properties: { resourceId: RESOURCE, lockOwner: OWNER, expiryInSeconds: EXPIRY, resource_id: RESOURCE, lock_owner: OWNER, expiry_in_seconds: EXPIRY },
    description: 'send {"resourceId": "...", "lockOwner": "...", "expiryInSeconds": n}',
  },
  responses: { '200': '{"success": true} when the lock is now the owner\'s, {"success": false} when someone holds it' },
});

export const UNLOCK = route('lock.unlock', 'Release a distributed lock held by this owner (alpha)', {
  params: STORE,
  body: {
    type: 'object',
    properties: { resourceId: RESOURCE, lockOwner: OWNER, resource_id: RESOURCE, lock_owner: OWNER },
    description: 'send {"resourceId": "...", "lockOwner": "..."}',
  },
  responses: { '200': '{"status": n}: 0 released, 1 no such lock, 2 held by another owner, 3 internal error' },
});

export const LOCK_SCHEMAS = [LOCK, UNLOCK];
