/**
 * HTTP service invocation: `/v1.0/invoke/<app-id>[.<namespace>]/method/<path…>` with any method,
 * and any other path sent with an `rt-app-id` (or `dapr-app-id`) header. Bodies stream through
 * in both directions; status, headers and query pass unchanged.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { malformed } from '../http/errors.ts';
import { rawRoute } from '../http/server.ts';
import { requestHeaders } from './headers.ts';
import { sendAnswer } from './internal-http.ts';
import type { InvokeAnswer, InvokeCall } from './call.ts';
import * as schemas from './schemas.ts';

/** Sends one call on to wherever its target names (an app id, an HTTPEndpoint, a URL). */
export type Dispatch = (target: string, call: InvokeCall) => Promise<InvokeAnswer>;

const INVOKE_PATH = /^\/v1\.0\/invoke\/([^/]+)\/method(\/.*)?$/;

export async function invokeRoutes(http: FastifyInstance, dispatch: Dispatch): Promise<void> {
  // the hot path, ahead of fastify's routing; the fastify route below serves the same for inject()
  rawRoute(http, '/v1.0/invoke/', (req, res) => {
    const [target, path, query] = invokeTarget(req.method ?? 'GET', req.url ?? '/');
    return forwardRaw(req, res, dispatch, target, path, query);
  });
  await http.register(async (scope) => {
    // the body reaches the handler as the request stream itself: nothing is buffered or limited here
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

    // an encoded body goes to the app as sent, with its Content-Encoding and length (http/body.ts)
    const config = { encodedBody: true };
    scope.all('/v1.0/invoke/*', { config, schema: schemas.INVOKE }, async (req, reply) => {
      const [target, path, query] = invokeTarget(req.method, req.url);
      return forward(req, reply, dispatch, target, path, query);
    });

    // any other path with rt-app-id / dapr-app-id is a call to that app's same path
    scope.all('/*', { config, schema: schemas.BY_HEADER }, async (req, reply) => {
      const id = header(req, 'rt-app-id') ?? header(req, 'dapr-app-id');
      if (id === undefined) return reply.callNotFound();
      const [path, query] = splitUrl(req.url);
      return forward(req, reply, dispatch, id, path, query);
    });
  });
}

/** `/v1.0/invoke/<target>/method/<path>?<query>` → [target, path, query]; a 400 for any other form. */
function invokeTarget(method: string, url: string): [string, string, string] {
  const [path, query] = splitUrl(url);
  const m = INVOKE_PATH.exec(path);
  if (!m || !m[2] || m[2] === '/') throw malformed(`${method} ${path}: the form is /v1.0/invoke/<app-id>/method/<method path>`);
  try {
    return [decodeURIComponent(m[1]), m[2], query];
  } catch {
    throw malformed(`the app id "${m[1]}" is not valid percent-encoding`);
  }
}

/** The raw route's call: the answer streams into node's response as it comes. */
async function forwardRaw(req: IncomingMessage, res: ServerResponse, dispatch: Dispatch, target: string, path: string, query: string): Promise<void> {
  const body = hasBody(req.headers) ? req : undefined;
  sendAnswer(res, await call(req, res, body, dispatch, target, path, query), () => undefined);
}

/** The fastify route's call (inject(), the rt-app-id header form): the same, once the answer is there. */
async function forward(req: FastifyRequest, reply: FastifyReply, dispatch: Dispatch, target: string, path: string, query: string): Promise<FastifyReply> {
  // fastify parses no body of a GET, HEAD or TRACE (req.body stays undefined): the request stream is the body then
  const body = hasBody(req.headers) ? ((req.body as Readable | undefined) ?? req.raw) : undefined;
  const answer = await call(req.raw, reply.raw, body, dispatch, target, path, query);
  // a call that failed before answering went to fastify's error handler above; an answer is written by node
  reply.hijack();
  sendAnswer(reply.raw, answer, () => undefined);
  return reply;
}

function call(req: IncomingMessage, res: ServerResponse, body: Readable | undefined, dispatch: Dispatch, target: string, path: string, query: string): Promise<InvokeAnswer> {
  const abort = new AbortController();
  // the caller went away before the answer was sent: stop the call downstream too
  res.once('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  return dispatch(target, { method: req.method ?? 'GET', path, query, headers: requestHeaders(req.rawHeaders), body, signal: abort.signal });
}

/**
 * Whether the caller sent a body, whatever the verb: a GET or HEAD with one passes it on too (the
 * ecosystem's SDKs send `GET` with data when no verb is given). Framing says it, not the method.
 */
function hasBody(headers: IncomingHttpHeaders): boolean {
  const len = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

function splitUrl(url: string): [string, string] {
  const q = url.indexOf('?');
  return q < 0 ? [url, ''] : [url.slice(0, q), url.slice(q)];
}
