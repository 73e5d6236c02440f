/**
 * The bindings building block: output bindings (the service shared by HTTP and gRPC, and the
 * HTTP route) and input bindings (started once the app is ready).
 */
import { defineBlock } from '../block-graph.ts';
import { startInputBindings } from './input.ts';
import { outputBindingRoutes } from './routes.ts';
import { BindingsService } from './service.ts';

export const block = defineBlock({
  name: 'bindings',
  uses: ['resiliency', 'tracing'],
  provides: ['bindings'],
  async setup(ctx) {
    const bindings = new BindingsService(ctx.components, ctx.services.resiliency, ctx.services.tracing);
    await outputBindingRoutes(ctx, bindings);
    startInputBindings(ctx);
    return { bindings };
  },
});
