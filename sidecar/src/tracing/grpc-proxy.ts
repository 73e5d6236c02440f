/**
 * Spans of proxied gRPC calls (invoke/grpc-proxy.ts): a CLIENT span on the caller's sidecar and a
 * SERVER span on the callee's, each a child of the context the call's metadata brought; the
 * metadata passed on then carries the span's own context to the next hop.
 */
import * as grpc from '@grpc/grpc-js';
import { rpcAttributes } from './grpc.ts';
import type { Attributes, RtSpan } from './sdk.ts';
import { contextHeaders, type TracingService } from './service.ts';

/** Starts the span of a proxied call and puts its context in `md` (the metadata passed on). */
export function proxiedCallSpan(tracing: TracingService, kind: 'client' | 'server', path: string, md: grpc.Metadata, attrs: Attributes): RtSpan {
  const span = tracing.start(path.slice(1), kind, { traceparent: md.get('traceparent')[0], tracestate: md.get('tracestate')[0] }, { ...rpcAttributes(path), 'rt.operation': 'invoke.grpc', ...attrs });
  const h = contextHeaders(span);
  md.set('traceparent', h.traceparent);
  if (h.tracestate) md.set('tracestate', h.tracestate);
  else md.remove('tracestate');
  return span;
}

/** Ends the span with the call's gRPC status. */
export function endProxiedCall(span: RtSpan, status: { code?: grpc.status; details?: string }): void {
  const code = status.code ?? grpc.status.OK;
  span.setAttributes({ 'rpc.grpc.status_code': code });
  span.end(code === grpc.status.OK ? undefined : `${grpc.status[code] ?? code}: ${status.details ?? ''}`);
}
