/** The metadata building block: GET/PUT /v1.0/metadata and POST /v1.0/shutdown (the service itself is the sidecar's: ctx.metadata). */
import { defineBlock } from '../block-graph.ts';
import { metadataRoutes } from './routes.ts';

export const block = defineBlock({ name: 'metadata', setup: metadataRoutes });
