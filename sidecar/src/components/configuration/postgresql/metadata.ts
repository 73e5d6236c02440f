/**
 * The metadata of configuration.postgresql as the reference names it: state.postgresql's
 * `connectionString`, the `table` of the items, the `notifyChannel` (alias `pgNotifyChannel`)
 * its trigger notifies on, `timeout` and `maxConns`. Kept apart from the component's code for
 * the operator.
 */
import { defineMetadata } from '../../metadata/decode.ts';
import { POSTGRES_CONNECTION } from '../../state/postgresql/metadata.ts';

export const METADATA = defineMetadata('configuration.postgresql', {
  ...POSTGRES_CONNECTION,
  table: { type: 'string', required: true, doc: 'the table of the items: key, value, version, metadata' },
  /** Else a subscription's request metadata `pgNotifyChannel` names it. */
  notifyChannel: { type: 'string', aliases: ['pgNotifyChannel'] },
  /** Bound on each query. */
  timeout: { type: 'duration', default: 20_000, min: 1000, aliases: ['timeoutInSeconds'] },
  /** 0 or less: 10. */
  maxConns: { type: 'integer', default: 0 },
});
