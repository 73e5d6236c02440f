/**
 * The configuration building block: the configuration service (shared by HTTP and gRPC, its
 * subscriptions stopped when the sidecar stops) and its HTTP routes.
 */
import { defineBlock } from '../block-graph.ts';
import { configurationRoutes } from './routes.ts';
import { ConfigurationService } from './service.ts';

export const block = defineBlock({
  name: 'configuration',
  uses: ['resiliency'],
  provides: ['configuration'],
  async setup(ctx) {
    const configuration = new ConfigurationService(ctx.components, ctx.log.child({ block: 'configuration' }), ctx.services.resiliency);
    ctx.onClose(() => configuration.close());
    configurationRoutes(ctx, configuration);
    return { configuration };
  },
});
