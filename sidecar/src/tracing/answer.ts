/**
 * The request span's context in the answer to the caller, as the reference runtime gives it: HTTP
 * answers carry `traceparent` (and `tracestate` when there is one) unless the answer brings its
 * own (an app's, passed back through invocation); gRPC answers carry `grpc-trace-bin` (the
 * OpenCensus binary form the reference sends) and `traceparent` in their header metadata, except
 * InvokeService's, whose metadata is the app's. Only ever called with tracing on.
 */
import * as grpc from '@grpc/grpc-js';
import type { OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { TraceParent } from './context.ts';
import type { RtSpan } from './sdk.ts';
import { contextHeaders } from './service.ts';

/** Sets the span's headers on `res` before anything is written; headers the handler writes win. */
export function answerWithContext(res: ServerResponse, span: RtSpan): void {
  const h = contextHeaders(span);
  res.setHeader('traceparent', h.traceparent);
  if (h.tracestate === undefined) return;
  res.setHeader('tracestate', h.tracestate);
  // an answer with a traceparent of its own but no tracestate must not get ours beside it
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const given = args.findLast((a) => typeof a === 'object' && a !== null) as OutgoingHttpHeaders | OutgoingHttpHeader[] | undefined;
    if (given && names(given, 'traceparent') && !names(given, 'tracestate')) this.removeHeader('tracestate');
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
}

/** Whether writeHead's headers (an object, or a flat [name, value, …] list) name `name`. */
function names(given: OutgoingHttpHeaders | OutgoingHttpHeader[], name: string): boolean {
  if (!Array.isArray(given)) return Object.keys(given).some((k) => k.toLowerCase() === name);
  for (let i = 0; i < given.length; i += 2) if (String(given[i]).toLowerCase() === name) return true;
  return false;
}

const NOT_ANSWERED = new Set(['/dapr.proto.runtime.v1.Dapr/InvokeService']);

/** Whether a gRPC method's answer carries the span's context. */
export const answersWithContext = (path: string): boolean => !NOT_ANSWERED.has(path);

/** Adds the span's context to a gRPC answer's header metadata. */
export function putAnswerContext(md: grpc.Metadata, span: RtSpan): void {
  md.set('grpc-trace-bin', traceContextBinary(span.context));
  md.set('traceparent', contextHeaders(span).traceparent);
}

/**
 * The OpenCensus binary trace context (what gRPC's `grpc-trace-bin` holds): version 0, then field
 * 0 the 16-byte trace id, field 1 the 8-byte span id, field 2 the one-byte trace options.
 */
export function traceContextBinary(ctx: TraceParent): Buffer {
  const b = Buffer.alloc(29);
  b[1] = 0;
  b.write(ctx.traceId, 2, 16, 'hex');
  b[18] = 1;
  b.write(ctx.spanId, 19, 8, 'hex');
  b[27] = 2;
  b[28] = ctx.flags & 0xff;
  return b;
}

/** A trailers-only answer's metadata (an error before any message) with the span's context added. */
export function withAnswerContext(md: grpc.Metadata | null | undefined, span: RtSpan): grpc.Metadata {
  const out = md ? md.clone() : new grpc.Metadata();
  putAnswerContext(out, span);
  return out;
}
