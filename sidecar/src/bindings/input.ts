/** Starts input bindings once the app is ready, so their first events find it listening. */
import type { SidecarContext } from '../context.ts';

export async function setup(ctx: SidecarContext): Promise<void> {
  ctx.onAppReady(async () => {
    for (const { name, binding } of ctx.components.inputBindings()) {
      try {
        await binding.start();
        ctx.log.info({ component: name }, 'input binding started');
      } catch (e) {
        ctx.log.error({ component: name, err: e }, 'input binding failed to start');
      }
    }
  });
}
