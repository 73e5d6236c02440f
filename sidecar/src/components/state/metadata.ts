/**
 * What the runtime itself reads from every state store's metadata, built-in or pluggable
 * (checked by the registry before the store reads its own fields).
 */
import { defineMetadata } from '../metadata/decode.ts';

export const STATE_STORE_METADATA = defineMetadata('state.*', {
  /** The store of actor (workflow) state. */
  actorStateStore: { type: 'boolean', default: false },
});
