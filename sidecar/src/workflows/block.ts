/** The workflows building block: the engine, its HTTP routes and the TaskHub gRPC service (setup.ts). Its timers use the jobs block's reminders when there are any. */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'workflows', uses: ['internalJobs', 'tracing'], provides: ['workflows'], setup });
