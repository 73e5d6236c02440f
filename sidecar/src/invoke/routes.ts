/**
 * HTTP service invocation: `/v1.0/invoke/<app-id>[.<namespace>]/method/<path…>` with any method,
 * and any other path sent with an `rt-app-id` (or `dapr-app-id`) header. Bodies stream through
 * in both directions; status, headers and query pass unchanged.
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { malformed } from '../http/errors.ts';
import { DispatchedAnswer } from './answer.ts';
import { headerObject, requestHeaders } from './headers.ts';
import type { InvokeAnswer, InvokeCall } from './invoker.ts';

/** Sends one call on to wherever its target names (an app id, an HTTPEndpoint, a URL). */
export type Dispatch = (target: string, call: InvokeCall) => Promise<InvokeAnswer>;

const INVOKE_PATH = /^\/v1\.0\/invoke\/([^/]+)\/method(\/.*)?$/;

export async function invokeRoutes(http: FastifyInstance, dispatch: Dispatch): Promise<void> {
  await http.register(async (scope) => {
    // the body reaches the handler as the request stream itself: nothing is buffered or limited here
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

    scope.all('/v1.0/invoke/*', async (req, reply) => {
      const [path, query] = splitUrl(req.url);
      const m = INVOKE_PATH.exec(path);
      if (!m || !m[2] || m[2] === '/') throw malformed(`${req.method} ${path}: the form is /v1.0/invoke/<app-id>/method/<method path>`);
      let target: string;
      try {
        target = decodeURIComponent(m[1]);
      } catch {
        throw malformed(`the app id "${m[1]}" is not valid percent-encoding`);
      }
      return forward(req, reply, dispatch, target, m[2], query);
    });

    // any other path with rt-app-id / dapr-app-id is a call to that app's same path
    scope.all('/*', async (req, reply) => {
      const id = header(req, 'rt-app-id') ?? header(req, 'dapr-app-id');
      if (id === undefined) return reply.callNotFound();
      const [path, query] = splitUrl(req.url);
      return forward(req, reply, dispatch, id, path, query);
    });
  });
}

async function forward(req: FastifyRequest, reply: FastifyReply, dispatch: Dispatch, target: string, path: string, query: string): Promise<FastifyReply> {
  const abort = new AbortController();
  // the caller went away before the answer was sent: stop the call downstream too
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  const body = hasBody(req) ? (req.body as Readable | undefined) : undefined;
  const res = await dispatch(target, { method: req.method, path, query, headers: requestHeaders(req.raw.rawHeaders), body, signal: abort.signal });
  if (res instanceof DispatchedAnswer) {
    // the answer writes itself into node's response: no stream, no copy of its headers list
    reply.hijack();
    res.sendTo(reply.raw);
    return reply;
  }
  reply.status(res.status);
  const headers = headerObject(res.headers);
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  if (req.method === 'HEAD' || res.status === 204 || res.status === 304) {
    res.body.resume();
    return reply.send();
  }
  return reply.send(res.body);
}

function hasBody(req: FastifyRequest): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return false;
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
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
