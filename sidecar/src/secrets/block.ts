/** The secrets building block: the secrets service (shared by HTTP and gRPC) and its HTTP routes. */
import { defineBlock } from '../block-graph.ts';
import { secretsRoutes } from './routes.ts';
import { SecretsService } from './service.ts';

export const block = defineBlock({
  name: 'secrets',
  uses: ['resiliency'],
  provides: ['secrets'],
  async setup(ctx) {
    const secrets = new SecretsService(ctx.components, ctx.services.resiliency);
    secretsRoutes(ctx, secrets);
    return { secrets };
  },
});
