/** Spans of deliveries to the app: pub/sub (the semantic conventions' messaging attributes), input bindings and job triggers. */
import type { BatchPoster } from '../pubsub/bulk.ts';
import type { InputBindingEvent, InputBindingReply } from '../components/types.ts';
import type { CloudEvent } from '../pubsub/cloudevent.ts';
import type { SubscriptionInfo } from '../resources/types.ts';
import type { RtSpan } from './sdk.ts';
import { contextHeaders, type TracingService } from './service.ts';

/** A CONSUMER span whose parent is the event's traceparent; `headers` (to the app) get its context. */
export function consumerSpan(tracing: TracingService, event: CloudEvent, sub: SubscriptionInfo, path: string, headers: Record<string, string>): RtSpan {
  const span = tracing.start(`process ${sub.topic}`, 'consumer', { traceparent: event.traceparent, tracestate: event.tracestate }, {
    'messaging.system': 'rt',
    'messaging.destination.name': sub.topic,
    'messaging.operation.type': 'process',
    'messaging.message.id': String(event.id ?? ''),
    'rt.component': sub.pubsubname,
    'rt.operation': 'deliver',
    'url.path': path,
  });
  Object.assign(headers, contextHeaders(span));
  return span;
}

/**
 * A job trigger delivered to the app: a new trace (a trigger carries no context), its span's
 * context to the app (HTTP headers, or the gRPC metadata of AppCallback.OnJobEvent).
 */
export function jobSpan(tracing: TracingService, job: string, grpc = false): RtSpan {
  return tracing.start(`job ${job}`, 'client', undefined, {
    ...(grpc ? { 'rpc.system': 'grpc', 'rpc.service': 'dapr.proto.runtime.v1.AppCallback', 'rpc.method': 'OnJobEvent' } : { 'http.request.method': 'POST', 'url.path': `/job/${encodeURIComponent(job)}` }),
    'rt.component': 'scheduler',
    'rt.operation': 'jobs.trigger',
    'rt.job': job,
  });
}

/**
 * Bulk delivery: a CONSUMER span per batch sent to the app, under the first entry's context and
 * linked to each other entry's (the messaging conventions' batch receive), so every publisher's
 * trace leads to the batch. Each entry's CloudEvent keeps its own traceparent, which the app reads per entry.
 */
export function tracedBatches(tracing: TracingService, sub: SubscriptionInfo, post: BatchPoster): BatchPoster {
  return async (path, entries) => {
    const first = entries[0]?.event;
    const span = tracing.start(`process ${sub.topic}`, 'consumer', { traceparent: first?.traceparent, tracestate: first?.tracestate }, {
      'messaging.system': 'rt',
      'messaging.destination.name': sub.topic,
      'messaging.operation.type': 'process',
      'messaging.batch.message_count': entries.length,
      'rt.component': sub.pubsubname,
      'rt.operation': 'deliver.bulk',
      'url.path': path,
    }, entries.map((e) => e.event.traceparent));
    try {
      const outcomes = await post(path, entries);
      const retried = typeof outcomes === 'string' ? (outcomes === 'RETRY' ? entries.length : 0) : entries.filter((e) => (outcomes.get(e.entryId) ?? 'RETRY') === 'RETRY').length;
      span.setAttributes({ 'rt.retried_entries': retried });
      span.end(retried ? `${retried} of ${entries.length} entries to retry` : undefined);
      return outcomes;
    } catch (e) {
      span.end((e as Error).message);
      throw e;
    }
  };
}

/**
 * An input binding's event to the app: a CONSUMER span under the event's `traceparent` /
 * `tracestate` metadata when the component gave one (else a new trace); `trace` (to the app) gets its context.
 */
export function inputBindingSpan(tracing: TracingService, name: string, event: InputBindingEvent, trace: Record<string, string>): RtSpan {
  const span = tracing.start(`bindings/${name}`, 'consumer', { traceparent: event.metadata.traceparent, tracestate: event.metadata.tracestate }, {
    'rt.component': name,
    'rt.operation': 'bindings.input',
    'url.path': `/${name}`,
  });
  Object.assign(trace, contextHeaders(span));
  return span;
}

/** Ends an input binding's span with the app's answer. */
export async function tracedInputEvent(span: RtSpan, deliver: () => Promise<InputBindingReply>): Promise<InputBindingReply> {
  try {
    const reply = await deliver();
    span.setAttributes({ 'http.response.status_code': reply.status });
    span.end(reply.status < 200 || reply.status >= 300 ? `the app answered ${reply.status}` : undefined);
    return reply;
  } catch (e) {
    span.end((e as Error).message);
    throw e;
  }
}
