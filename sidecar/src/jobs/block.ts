/** The jobs building block: the jobs API, and durable reminders for other blocks when a scheduler is configured (setup.ts). */
import { defineBlock } from '../block-graph.ts';
import { setup } from './setup.ts';

export const block = defineBlock({ name: 'jobs', uses: ['resiliency', 'tracing'], provides: ['jobs', 'internalJobs'], setup });
