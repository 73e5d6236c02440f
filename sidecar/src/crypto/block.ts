/** The cryptography building block: its service (shared by HTTP and gRPC) and its HTTP routes. */
import { defineBlock } from '../block-graph.ts';
import { cryptoRoutes } from './routes.ts';
import { CryptoService } from './service.ts';

export const block = defineBlock({
  name: 'crypto',
  provides: ['crypto'],
  async setup(ctx) {
    const crypto = new CryptoService(ctx.components, ctx.log.child({ block: 'crypto' }));
    await cryptoRoutes(ctx, crypto);
    return { crypto };
  },
});
