/**
 * The distributed lock building block: the lock service (shared by HTTP and gRPC) and its HTTP
 * routes; the gRPC runtime API serves TryLockAlpha1 / UnlockAlpha1 over the same service.
 */
import { defineBlock } from '../block-graph.ts';
import { lockRoutes } from './routes.ts';
import { LockService } from './service.ts';

export const block = defineBlock({
  name: 'lock',
  uses: ['resiliency'],
  provides: ['lock'],
  async setup(ctx) {
    const lock = new LockService(ctx.components, ctx.options.appId, ctx.services.resiliency);
    lockRoutes(ctx, lock);
    return { lock };
  },
});
