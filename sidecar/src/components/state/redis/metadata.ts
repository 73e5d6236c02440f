/**
 * The metadata of state.redis, and the connection fields pubsub.redis shares. Kept apart from
 * the store's code, so that the operator reads the declaration without the component.
 */
import { defineMetadata, metadataFields } from '../../metadata/decode.ts';
import { MAX_TTL_SECONDS } from '../common.ts';

/** The connection fields state.redis and pubsub.redis share, as the reference names them. */
export const REDIS_CONNECTION = metadataFields({
  redisHost: { type: 'string', required: true, doc: 'host:port, e.g. localhost:6379' },
  redisUsername: { type: 'string' },
  redisPassword: { type: 'string', secret: true },
  redisDB: { type: 'integer', default: 0, min: 0 },
  redisType: { type: 'enum', values: ['node', 'cluster'], default: 'node' },
  enableTLS: { type: 'boolean', default: false },
  failover: { type: 'boolean', default: false },
});

export const METADATA = defineMetadata('state.redis', {
  ...REDIS_CONNECTION,
  /** The TTL of a write whose request names none; 0 or -1: none. */
  ttlInSeconds: { type: 'integer', min: -1, max: MAX_TTL_SECONDS },
});
