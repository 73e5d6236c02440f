/**
 * The metadata of state.postgresql, kept apart from the store's code so that the operator reads
 * the declaration without the component.
 */
import { defineMetadata, metadataFields } from '../../metadata/decode.ts';

/** The connection field state.postgresql and configuration.postgresql share (connection.ts reads it). */
export const POSTGRES_CONNECTION = metadataFields({
  connectionString: { type: 'string', required: true, secret: true, aliases: ['url'], doc: 'e.g. postgres://user:pass@host:5432/db' },
});

/** The fields as the reference declares them (its `timeoutInSeconds` and `cleanupIntervalInSeconds` are aliases there too). */
export const METADATA = defineMetadata('state.postgresql', {
  ...POSTGRES_CONNECTION,
  tableName: { type: 'string', default: 'state' },
  /** Bound on each query. */
  timeout: { type: 'duration', default: 20_000, min: 1, aliases: ['timeoutInSeconds'] },
  /** 0 or less: no sweep (expired rows are never returned anyway). */
  cleanupInterval: { type: 'duration', default: 3_600_000, aliases: ['cleanupIntervalInSeconds'] },
  maxConns: { type: 'integer', default: 10, min: 1 },
});
