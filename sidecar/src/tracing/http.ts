/**
 * A SERVER span for each HTTP API request: fastify hooks for routed requests, and the raw-route
 * hook for the paths served ahead of fastify (service invocation). The request's traceparent is
 * replaced by the span's, in `headers` and `rawHeaders` alike, so whatever the request is passed on
 * to (invocation forwards rawHeaders) carries this span as its parent. The answer carries the
 * span's context back to the caller (answer.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setRawRequestHook } from '../http/server.ts';
import { answerWithContext } from './answer.ts';
import { apiContext } from './components.ts';
import type { RtSpan } from './sdk.ts';
import { contextHeaders, type TracingService } from './service.ts';

const spans = new WeakMap<FastifyRequest, RtSpan>();

export function traceHttpServer(app: FastifyInstance, tracing: TracingService): void {
  app.addHook('onRequest', (req, reply, done) => {
    const route = req.routeOptions.url;
    const path = req.url.split('?')[0];
    const span = tracing.start(`${req.method} ${route ?? path}`, 'server', req.headers, {
      'http.request.method': req.method,
      'url.path': path,
      ...(route ? { 'http.route': route, 'rt.operation': route } : {}),
    });
    spans.set(req, span);
    carryOn(req.raw, span);
    answerWithContext(reply.raw, span);
    done();
  });
  // the handler runs in the span's context: component calls it makes are its children (components.ts)
  app.addHook('preHandler', (req, reply, done) => {
    const span = spans.get(req);
    if (span) apiContext().run(contextHeaders(span), done);
    else done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    const span = spans.get(req);
    if (span) endHttpSpan(span, reply.statusCode);
    done();
  });
  setRawRequestHook(app, (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '').split('?')[0];
    const span = tracing.start(`${req.method} ${invokeRoute(path)}`, 'server', req.headers, { 'http.request.method': req.method ?? '', 'url.path': path, 'http.route': invokeRoute(path), 'rt.operation': 'invoke' });
    carryOn(req, span);
    answerWithContext(res, span);
    res.once('close', () => endHttpSpan(span, res.statusCode));
  });
}

/** The route of an invocation path (its app id kept, its method path not: a bounded span name). */
function invokeRoute(path: string): string {
  return path.startsWith('/v1.0/invoke/') ? '/v1.0/invoke/{id}/method/{method}' : path;
}

export function endHttpSpan(span: RtSpan, status: number): void {
  span.setAttributes({ 'http.response.status_code': status });
  span.end(status >= 500 ? `HTTP ${status}` : undefined);
}

/** Puts the span's context on the request, replacing what the caller sent. */
export function carryOn(req: IncomingMessage, span: RtSpan): void {
  const h = contextHeaders(span);
  setRequestHeader(req, 'traceparent', h.traceparent);
  setRequestHeader(req, 'tracestate', h.tracestate);
}

function setRequestHeader(req: IncomingMessage, name: string, value: string | undefined): void {
  if (value === undefined) delete req.headers[name];
  else req.headers[name] = value;
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) if (raw[i].toLowerCase() === name) raw.splice(i, 2);
  if (value !== undefined) raw.push(name, value);
}
