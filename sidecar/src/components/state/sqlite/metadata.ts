/**
 * The metadata of state.sqlite, kept apart from the store's code so that the operator reads the
 * declaration without the component.
 */
import { defineMetadata } from '../../metadata/decode.ts';

export const METADATA = defineMetadata('state.sqlite', {
  connectionString: { type: 'string', required: true, aliases: ['url'], doc: 'a file path (e.g. ./data/state.db) or ":memory:"' },
  tableName: { type: 'string', default: 'state' },
  busyTimeout: { type: 'duration', default: 5000, min: 0 },
  /** 0 or less: no sweep (expired rows are never returned anyway). */
  cleanupInterval: { type: 'duration', default: 3_600_000, aliases: ['cleanupIntervalInSeconds'] },
});
