/**
 * The metadata of lock.redis: state.redis' connection fields and the lock block's keyPrefix.
 * Kept apart from the component's code, so that the operator reads the declaration without it.
 */
import { defineMetadata } from '../../metadata/decode.ts';
import { REDIS_CONNECTION } from '../../state/redis/metadata.ts';
import { KEY_PREFIX_RULE, LOCK_STORE_FIELDS } from '../metadata.ts';

export const METADATA = defineMetadata('lock.redis', { ...REDIS_CONNECTION, ...LOCK_STORE_FIELDS }, [KEY_PREFIX_RULE]);
