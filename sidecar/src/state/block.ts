/** The state building block: the state service (shared by HTTP and gRPC) and its HTTP routes. */
import { defineBlock } from '../block-graph.ts';
import type { SidecarContext } from '../context.ts';
import { keyPrefixFor } from './keys.ts';
import { stateRoutes } from './routes.ts';
import { StateService } from './service.ts';

export const block = defineBlock({
  name: 'state',
  uses: ['resiliency'],
  provides: ['state'],
  async setup(ctx) {
    const state = new StateService(ctx.components, ctx.options.appId, ctx.options.namespace, ctx.services.resiliency);
    await checkKeyPrefixes(ctx);
    stateRoutes(ctx, state);
    return { state };
  },
});

/** A keyPrefix that cannot work stops the sidecar now, naming the component, not at the first call. */
async function checkKeyPrefixes(ctx: SidecarContext): Promise<void> {
  for (const name of ctx.components.namesOf('state')) {
    const loaded = ctx.components.get(name)!;
    try {
      keyPrefixFor(loaded.spec.metadata.keyPrefix, name, ctx.options.appId, ctx.options.namespace);
    } catch (e) {
      const why = `component "${name}" (${loaded.spec.type}, from ${loaded.spec.source}): ${(e as Error).message}`;
      if (!loaded.spec.ignoreErrors) throw new Error(why);
      ctx.log.warn({ component: name }, `${why} (ignored: ignoreErrors is true; the store is not loaded)`);
      await ctx.components.remove(name);
    }
  }
}
