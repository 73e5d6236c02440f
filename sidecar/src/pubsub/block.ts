/** The pub/sub building block: the publish API and the app's subscriptions (setup.ts). */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'pubsub', uses: ['resiliency', 'tracing'], provides: ['pubsub'], setup });
