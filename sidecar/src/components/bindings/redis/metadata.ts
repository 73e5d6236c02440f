/**
 * The metadata of bindings.redis: state.redis' connection fields. Kept apart from the binding's
 * code, so that the operator reads the declaration without it.
 */
import { defineMetadata } from '../../metadata/decode.ts';
import { REDIS_CONNECTION } from '../../state/redis/metadata.ts';

export const METADATA = defineMetadata('bindings.redis', REDIS_CONNECTION);
