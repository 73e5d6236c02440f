/** The metrics building block: Prometheus text on its own port (setup.ts). */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'metrics', setup });
