/**
 * A call's trace context as it travels: what an incoming call carries (HTTP headers or gRPC
 * metadata) and the headers that carry a span's context onward. A module of its own so that the
 * service and the component spans (components.ts) share it without importing each other.
 */
import { formatTraceParent } from './context.ts';
import type { RtSpan } from './sdk.ts';

/** Where a call's incoming context is read from (HTTP headers or gRPC metadata, first values). */
export interface CarriedContext {
  traceparent?: unknown;
  tracestate?: unknown;
  [other: string]: unknown;
}

/** The context a gRPC call's metadata carries (first values). */
export function metadataContext(metadata: { get(key: string): unknown[] }): CarriedContext {
  return { traceparent: metadata.get('traceparent')[0], tracestate: metadata.get('tracestate')[0] };
}

/** The headers that carry a span's context onward. */
export function contextHeaders(span: RtSpan): { traceparent: string; tracestate?: string } {
  const out: { traceparent: string; tracestate?: string } = { traceparent: formatTraceParent(span.context) };
  if (span.traceState) out.tracestate = span.traceState;
  return out;
}
