/**
 * The metadata of pubsub.redis: state.redis' connection fields and the stream's own. Kept apart
 * from the component's code, so that the operator reads the declaration without the component.
 */
import { defineMetadata, metadataFields } from '../../metadata/decode.ts';
import { REDIS_CONNECTION } from '../../state/redis/metadata.ts';

/** The stream fields of pubsub.redis (its connection fields are state.redis'). */
export const STREAM = metadataFields({
  /** The consumer group; default the app id. */
  consumerID: { type: 'string' },
  processingTimeout: { type: 'duration', default: 60_000, min: 1 },
  redeliverInterval: { type: 'duration', default: 15_000, min: 1 },
  concurrency: { type: 'integer', default: 10, min: 1 },
  maxLenApprox: { type: 'integer', min: 1 },
});
export const METADATA = defineMetadata('pubsub.redis', { ...REDIS_CONNECTION, ...STREAM });
