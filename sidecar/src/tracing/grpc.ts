/**
 * A SERVER span for each gRPC API call (a grpc-js server interceptor, added to the port only when
 * tracing is on): its parent is the call's traceparent / tracestate metadata, and the metadata the
 * handler sees carries the span's context instead, for the calls it passes on, and the handler
 * runs inside `apiContext()` holding that context (the parent of its component calls' CLIENT spans).
 */
import * as grpc from '@grpc/grpc-js';
import { answersWithContext, putAnswerContext, withAnswerContext } from './answer.ts';
import { apiContext } from './components.ts';
import type { RtSpan } from './sdk.ts';
import { contextHeaders, metadataContext, type CarriedContext, type TracingService } from './service.ts';

/** "/pkg.Service/Method" → the RPC attributes of the semantic conventions. */
export function rpcAttributes(path: string): { 'rpc.system': string; 'rpc.service': string; 'rpc.method': string } {
  const slash = path.lastIndexOf('/');
  return { 'rpc.system': 'grpc', 'rpc.service': path.slice(1, slash > 0 ? slash : undefined), 'rpc.method': slash > 0 ? path.slice(slash + 1) : '' };
}

export function grpcTracingInterceptor(tracing: TracingService): grpc.ServerInterceptor {
  return (method, call) => {
    let span: RtSpan | undefined;
    let carried: CarriedContext | undefined;
    const answers = answersWithContext(method.path);
    let headSent = false;
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, mdNext) {
            const attrs = rpcAttributes(method.path);
            span = tracing.start(method.path.slice(1), 'server', metadataContext(metadata), { ...attrs, 'rt.operation': attrs['rpc.method'] });
            const h = contextHeaders(span);
            metadata.set('traceparent', h.traceparent);
            if (h.tracestate) metadata.set('tracestate', h.tracestate);
            else metadata.remove('tracestate');
            // the handler runs in the span's context: component calls it makes are its children
            // (components.ts). Messages and the half-close may start the handler (unary calls do on
            // the half-close), so each is handed on inside it.
            carried = h;
            apiContext().run(h, mdNext, metadata);
          },
          onReceiveMessage(message, msgNext) {
            if (carried) apiContext().run(carried, msgNext, message);
            else msgNext(message);
          },
          onReceiveHalfClose(hcNext) {
            if (carried) apiContext().run(carried, hcNext);
            else hcNext();
          },
        });
      },
      sendMetadata(md, next) {
        headSent = true;
        if (span && answers) putAnswerContext(md, span);
        next(md);
      },
      sendStatus(status, next) {
        // an error before any message is a trailers-only answer: its headers are the status metadata
        if (span && answers && !headSent) status = { ...status, metadata: withAnswerContext(status.metadata, span) };
        if (span) {
          const code = status.code ?? grpc.status.OK;
          span.setAttributes({ 'rpc.grpc.status_code': code });
          span.end(code === grpc.status.OK ? undefined : `${grpc.status[code] ?? code}: ${status.details ?? ''}`);
          span = undefined;
        }
        next(status);
      },
    });
  };
}
