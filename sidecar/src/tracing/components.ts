/**
 * CLIENT spans of component calls (state, secrets, configuration, lock), made by the component-call
 * wrappers through `ResiliencyService.tracing` (set only while tracing is on). A call's parent is
 * the API request being served: the HTTP server span puts its context in `apiContext` (an
 * AsyncLocalStorage) for the handler, so the services need no context argument. State stores get
 * the database client attributes of the OpenTelemetry semantic conventions; a pluggable component
 * gets the span's context as `traceparent` / `tracestate` metadata (pluggable/connection.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { contextHeaders, type CarriedContext } from './carried.ts';
import type { Attributes, RtSpan, SpanKindName } from './sdk.ts';

// Made on first use, not when the module loads: an AsyncLocalStorage loads Node's implementation
// of it, which the sidecar's start does not need while tracing is off (test/build/bundle.test.ts).
let api: AsyncLocalStorage<CarriedContext> | undefined;
let component: AsyncLocalStorage<{ traceparent: string; tracestate?: string }> | undefined;

/** The context of the API call being served (traceparent / tracestate of its SERVER span). */
export function apiContext(): AsyncLocalStorage<CarriedContext> {
  return (api ??= new AsyncLocalStorage());
}

/** The context of the component call in progress (its CLIENT span): what a pluggable component gets as metadata. */
export function componentContext(): AsyncLocalStorage<{ traceparent: string; tracestate?: string }> {
  return (component ??= new AsyncLocalStorage());
}

/** What starts the spans (the tracing service). */
interface SpanStarting {
  start(name: string, kind: SpanKindName, carried: CarriedContext | undefined, attrs: Attributes): RtSpan;
}

/** The building block of a component type ("state.redis" → "state"); pub/sub and bindings have spans of their own. */
const TRACED = new Set(['state', 'secretstores', 'configuration', 'lock']);

/** `call` to component `name` of `type` under a CLIENT span; a failure marks the span's status error. */
export async function tracedComponentCall<T>(tracing: SpanStarting, name: string, type: string, operation: string | undefined, call: () => Promise<T>): Promise<T> {
  const kind = type.slice(0, type.indexOf('.'));
  if (!TRACED.has(kind)) return call();
  const attrs: Attributes = { 'rt.component': name, 'rt.component_type': type, 'rt.operation': operation ? `${kind}.${operation}` : kind };
  if (kind === 'state') {
    attrs['db.system'] = type.slice(type.indexOf('.') + 1);
    attrs['db.namespace'] = name;
    if (operation) attrs['db.operation.name'] = operation;
  }
  const span = tracing.start(operation ? `${kind}/${name} ${operation}` : `${kind}/${name}`, 'client', apiContext().getStore(), attrs);
  try {
    const r = await componentContext().run(contextHeaders(span), call);
    span.end();
    return r;
  } catch (e) {
    span.end((e as Error).message);
    throw e;
  }
}
