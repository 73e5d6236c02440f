/**
 * Starts input bindings once the app is ready, so their first events find it listening. An input
 * binding added or replaced later (a resource hot update) is started as soon as it is loaded; the
 * one it replaces stops when the registry closes it.
 */
import type { SidecarContext } from '../context.ts';
import type { InputBinding } from '../components/types.ts';

export function startInputBindings(ctx: SidecarContext): void {
  let appReady = false;
  const start = async (name: string, binding: InputBinding) => {
    try {
      await binding.start();
      ctx.log.info({ component: name }, 'input binding started');
    } catch (e) {
      ctx.log.error({ component: name, err: e }, 'input binding failed to start');
    }
  };
  ctx.components.onChange((event, c) => {
    if (!appReady || event !== 'added') return;
    const found = ctx.components.inputBindings().find((b) => b.name === c.spec.name && b.binding === c.instance);
    if (found) void start(found.name, found.binding);
  });
  ctx.onAppReady(async () => {
    appReady = true;
    for (const { name, binding } of ctx.components.inputBindings()) await start(name, binding);
  });
}
