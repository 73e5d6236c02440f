/** The pluggable components block: adds the component types found on sockets to the catalog, before components are created (setup.ts). */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'pluggable', phase: 'catalog', setup });
