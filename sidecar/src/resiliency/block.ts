/**
 * The resiliency block: the policies of the Resiliency resources, for the blocks that call apps
 * and components (they `use` it, so they start after it). No routes of its own; the metrics and
 * the metadata (its `resiliency` field, while a Resiliency resource applies) show what it counted.
 */
import { defineBlock } from '../block-graph.ts';
import { ResiliencyService } from './service.ts';

export const block = defineBlock({
  name: 'resiliency',
  uses: ['tracing'],
  provides: ['resiliency'],
  async setup(ctx) {
    const resiliency = new ResiliencyService(ctx.resources, ctx.options.appId, ctx.log.child({ block: 'resiliency' }));
    resiliency.tracing = ctx.services.tracing;
    ctx.metadata.setResiliencyProvider(() => resiliency.metadata());
    return { resiliency };
  },
});
