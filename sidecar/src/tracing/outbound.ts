/**
 * Spans of the calls the sidecar makes: a CLIENT span per service invocation (toward another
 * sidecar, an HTTPEndpoint or a URL), a PRODUCER span per publish, a CLIENT span per output
 * binding call. Each is a child of the context the call brought, and what goes on to the next hop
 * is the new span's context, so every hop has a span of its own with the right parent.
 */
import type { InvokeAnswer, InvokeCall } from '../invoke/call.ts';
import type { Header } from '../invoke/proto.ts';
import { endHttpSpan } from './http.ts';
import type { Attributes, RtSpan } from './sdk.ts';
import { contextHeaders, type CarriedContext, type TracingService } from './service.ts';

const valueOf = (headers: Header[], name: string): string | undefined => headers.find((h) => h.name === name)?.value;

/** The trace context a header list carries (its first traceparent and tracestate). */
export const carriedBy = (headers: Header[]): CarriedContext => ({ traceparent: valueOf(headers, 'traceparent'), tracestate: valueOf(headers, 'tracestate') });

/** `headers` with the span's traceparent / tracestate in place of any they had (a new list: a retried call keeps its own). */
export function withContext(headers: Header[], span: RtSpan): Header[] {
  const h = contextHeaders(span);
  const out = headers.filter((x) => x.name !== 'traceparent' && x.name !== 'tracestate');
  out.push({ name: 'traceparent', value: h.traceparent });
  if (h.tracestate) out.push({ name: 'tracestate', value: h.tracestate });
  return out;
}

/** Ends `span` with an invocation's answer (its HTTP status, and the gRPC app's status when there is one). */
export function endWithAnswer(span: RtSpan, answer: InvokeAnswer): void {
  if (answer.grpcStatus) span.setAttributes({ 'rpc.grpc.status_code': answer.grpcStatus.code });
  endHttpSpan(span, answer.status);
}

/** Runs `call` under `span`, ending it with the answer or the error. */
export async function underSpan(span: RtSpan, call: () => Promise<InvokeAnswer>): Promise<InvokeAnswer> {
  try {
    const answer = await call();
    endWithAnswer(span, answer);
    return answer;
  } catch (e) {
    span.end((e as Error).message);
    throw e;
  }
}

type Dispatch = (target: string, call: InvokeCall) => Promise<InvokeAnswer>;

/**
 * Service invocation's calling side: a CLIENT span per try toward `target` (an app id, an
 * HTTPEndpoint or a URL: `external` tells), whose context the next hop gets.
 */
export function tracedDispatch(tracing: TracingService, dispatch: Dispatch, external: (target: string) => boolean): Dispatch {
  return (target, call) => {
    const out = external(target);
    const attrs: Attributes = { 'http.request.method': call.method, 'url.path': call.path, 'rt.operation': 'invoke' };
    if (out) attrs['rt.endpoint'] = target;
    else attrs['rt.target_app_id'] = target;
    const span = tracing.start(`${call.method} ${out ? 'endpoint' : 'app'} ${target}`, 'client', carriedBy(call.headers), attrs);
    return underSpan(span, () => dispatch(target, { ...call, headers: withContext(call.headers, span) }));
  };
}

/** A PRODUCER span for one publish (or one bulk publish): its context goes into the CloudEvents. */
export function producerSpan(tracing: TracingService, pubsub: string, topic: string, carried: CarriedContext, count?: number, links?: unknown[]): RtSpan {
  return tracing.start(`publish ${topic}`, 'producer', carried, {
    'messaging.system': 'rt',
    'messaging.destination.name': topic,
    'messaging.operation.type': 'publish',
    ...(count === undefined ? {} : { 'messaging.batch.message_count': count }),
    'rt.component': pubsub,
    'rt.operation': count === undefined ? 'publish' : 'bulkpublish',
  }, links);
}

/**
 * The contexts the entries of a bulk publish bring of their own: a CloudEvent entry's
 * `traceparent` (kept as sent, so the batch's PRODUCER span links to it). Entries without one
 * carry the PRODUCER span's context and need no link.
 */
export function entryContexts(entries: { contentType?: string; parsed?: { value: unknown } }[]): unknown[] {
  const out: unknown[] = [];
  for (const e of entries) {
    if (!e.contentType?.includes('cloudevents')) continue;
    const v = e.parsed?.value;
    if (typeof v === 'object' && v !== null && 'traceparent' in v) out.push(v.traceparent);
  }
  return out;
}

/** Runs `work` under a span, ending it with its outcome (`failure`: what of a result is an error). */
export async function endAfter<T>(span: RtSpan, work: () => Promise<T>, failure?: (result: T) => string | undefined): Promise<T> {
  try {
    const r = await work();
    span.end(failure?.(r));
    return r;
  } catch (e) {
    span.end((e as Error).message);
    throw e;
  }
}

/**
 * An output binding call: a CLIENT span, and its context in the request's metadata as
 * `traceparent` / `tracestate` (as the reference runtime passes it to the component).
 */
export function bindingSpan(tracing: TracingService, name: string, operation: string, metadata: Record<string, string>, carried: CarriedContext): RtSpan {
  const span = tracing.start(`bindings/${name} ${operation}`, 'client', carried, { 'rt.component': name, 'rt.operation': `bindings.${operation}` });
  Object.assign(metadata, contextHeaders(span));
  return span;
}
