/**
 * The gRPC runtime API block (setup.ts): it needs the state, bindings, secrets, configuration
 * and lock services at start, and looks up jobs, workflows, pub/sub and actors per call (absent: those calls
 * answer that the block is not running).
 */
import { defineBlock } from '../../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({
  name: 'runtime-api',
  needs: ['state', 'bindings', 'secrets', 'configuration', 'lock'],
  uses: ['jobs', 'workflows', 'pubsub', 'crypto', 'actors'],
  setup,
});
