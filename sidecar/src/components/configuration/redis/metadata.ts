/**
 * The metadata of configuration.redis: state.redis' connection fields, as the reference's store
 * reads the same Redis settings. Kept apart from the component's code for the operator.
 */
import { defineMetadata } from '../../metadata/decode.ts';
import { REDIS_CONNECTION } from '../../state/redis/metadata.ts';

export const METADATA = defineMetadata('configuration.redis', { ...REDIS_CONNECTION });
