/** Spans of deliveries to the app: pub/sub (the semantic conventions' messaging attributes) and job triggers. */
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

/** A job trigger delivered to the app: a new trace (a trigger carries no context), its span's context to the app. */
export function jobSpan(tracing: TracingService, job: string): RtSpan {
  return tracing.start(`job ${job}`, 'client', undefined, {
    'http.request.method': 'POST',
    'url.path': `/job/${encodeURIComponent(job)}`,
    'rt.component': 'scheduler',
    'rt.operation': 'jobs.trigger',
    'rt.job': job,
  });
}
