/** The service invocation building block: the internal port, the registry entry and the invoke routes (setup.ts). */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'invoke', uses: ['resiliency', 'tracing'], provides: ['invoke', 'internalPort'], setup });
