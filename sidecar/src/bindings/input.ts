/**
 * Starts input bindings once the app is ready, so their first events find it listening. An input
 * binding added or replaced later (a resource hot update) is started as soon as it is loaded; the
 * one it replaces stops when the registry closes it.
 */
import type { AppChannel } from '../app/channel.ts';
import type { SidecarContext } from '../context.ts';
import type { InputBinding, InputBindingEvent, InputBindingReply } from '../components/types.ts';
import { componentCall, type ComponentTypes, type ResiliencyService } from '../resiliency/service.ts';
import { inputBindingSpan, tracedInputEvent } from '../tracing/messaging.ts';
import type { TracingService } from '../tracing/service.ts';

/**
 * One event of input binding `name` to the app, under the binding's inbound resiliency policy
 * (an answer outside 2xx is a failed try; a timeout aborts the POST). Without a policy the
 * binding's own retry rules alone apply, as before.
 */
export function deliverInputEvent(resiliency: ResiliencyService | undefined, components: ComponentTypes, app: AppChannel, name: string, event: InputBindingEvent, tracing?: TracingService): Promise<InputBindingReply> {
  const deliver = (trace?: Record<string, string>) =>
    componentCall(resiliency, components, name, 'Inbound', (signal) => app.deliverBinding(name, event, signal, trace), { failureOf: (r) => (r.status < 200 || r.status >= 300 ? { http: r.status } : undefined) });
  if (!tracing) return deliver();
  // tracing on: a CONSUMER span (under the event's traceparent metadata, if any), its context to the app
  const trace: Record<string, string> = {};
  return tracedInputEvent(inputBindingSpan(tracing, name, event, trace), () => deliver(trace));
}

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
