/**
 * The actor HTTP API, as the reference runtime serves it and the SDKs call it:
 *   GET|POST|PUT|DELETE /v1.0/actors/<type>/<id>/method/<m>   → the app's answer as it gave it
 *   GET  /v1.0/actors/<type>/<id>/state/<key>                → 200 the value, 204 none
 *   POST|PUT /v1.0/actors/<type>/<id>/state                  [{operation, request: {key, value, metadata}}] → 204
 *   POST|PUT /v1.0/actors/<type>/<id>/timers/<name>          {dueTime, period, ttl, data, callback} → 204
 *   DELETE   /v1.0/actors/<type>/<id>/timers/<name>          → 204
 *   POST|PUT /v1.0/actors/<type>/<id>/reminders/<name>       {dueTime, period, ttl, data, overwrite, failurePolicy} → 204
 *   GET      /v1.0/actors/<type>/<id>/reminders/<name>       → 200 the reminder
 *   DELETE   /v1.0/actors/<type>/<id>/reminders/<name>       → 204
 * Bodies reach the routes as bytes (any content type); JSON ones are parsed and checked here
 * against schemas.ts. Checks and errors: service.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseJsonText } from '../http/body.ts';
import { ApiError, malformed } from '../http/errors.ts';
import { checkBody, type JsonSchema, type RouteSchema } from '../http/schema.ts';
import { rawBodyLimit, rawBodyRoutes, rawRoute } from '../http/server.ts';
import { reminderRequestOf } from './reminder-request.ts';
import * as schemas from './schemas.ts';
import type { ActorsService, ActorStateOperation, TimerRequest } from './service.ts';

type Actor = { actorType: string; actorId: string };
type Req<P> = FastifyRequest<{ Params: Actor & P }>;

/** The route's body as JSON, checked against its schema; empty = undefined. */
function jsonBody(req: FastifyRequest, schema: RouteSchema): unknown {
  const b = req.body;
  const text = Buffer.isBuffer(b) ? b.toString('utf8') : typeof b === 'string' ? b : '';
  const value = text.trim() === '' ? undefined : parseJsonText(text);
  if (value !== undefined) checkBody((schema as { 'x-body': JsonSchema })['x-body'], value);
  return value;
}

function bytesOf(b: unknown): Uint8Array {
  return Buffer.isBuffer(b) ? b : typeof b === 'string' ? Buffer.from(b) : new Uint8Array();
}

function headersOf(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** A method call's path: the hot path, served ahead of fastify's routing (http/server.ts rawRoute). */
const METHOD_PATH = /^\/v1\.0\/actors\/([^/?]+)\/([^/?]+)\/method\/([^/?]+)(?:\?|$)/;
const RAW_HEADERS = ['content-type', 'content-encoding', 'dapr-reentrancy-id', 'rt-reentrancy-id'];

/** The request's body, up to `limit` bytes (413 beyond, as fastify answers). */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new ApiError(413, 'ERR_REQUEST_TOO_LARGE', `the request body is larger than ${limit} bytes (--max-body-size)`);
    parts.push(chunk);
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

function decoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw malformed(`"${s.slice(0, 60)}" in the path is not valid percent-encoding`);
  }
}

async function rawInvoke(actors: ActorsService, limit: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const m = METHOD_PATH.exec(req.url ?? '')!;
  if (!['GET', 'POST', 'PUT', 'DELETE'].includes(req.method ?? '')) throw new ApiError(405, 'ERR_MALFORMED_REQUEST', `${req.method} is not one of GET, POST, PUT, DELETE for an actor method`);
  const headers: Record<string, string> = {};
  for (const h of RAW_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  const body = await readBody(req, limit);
  const answer = await actors.invoke(decoded(m[1]!), decoded(m[2]!), decoded(m[3]!), body, headers);
  const ct = answer.headers['content-type'];
  res.writeHead(answer.status, ct ? { 'content-type': ct, 'content-length': answer.body.length } : { 'content-length': answer.body.length });
  res.end(answer.body);
}

export async function actorRoutes(http: FastifyInstance, actors: ActorsService): Promise<void> {
  const limit = rawBodyLimit(http);
  // the hot path, ahead of fastify's routing; the fastify route below serves the same for inject()
  rawRoute(http, METHOD_PATH, (req, res) => rawInvoke(actors, limit, req, res));
  await rawBodyRoutes(http, (scope) => {
    scope.route<{ Params: Actor & { method: string } }>({
      method: ['GET', 'POST', 'PUT', 'DELETE'],
      url: '/v1.0/actors/:actorType/:actorId/method/:method',
      schema: schemas.INVOKE,
      handler: async (req, reply) => {
        const p = req.params;
        const res = await actors.invoke(p.actorType, p.actorId, p.method, bytesOf(req.body), headersOf(req));
        if (res.headers['content-type']) reply.header('content-type', res.headers['content-type']);
        return reply.status(res.status).send(res.body);
      },
    });

    scope.get('/v1.0/actors/:actorType/:actorId/state/:key', { schema: schemas.STATE_GET }, async (req: Req<{ key: string }>, reply) => {
      const p = req.params;
      const value = await actors.getState(p.actorType, p.actorId, p.key);
      if (!value) return reply.status(204).send();
      return reply.status(200).header('content-type', 'application/json').send(Buffer.from(value));
    });

    const transaction = async (req: Req<object>, reply: FastifyReply) => {
      const body = (jsonBody(req, schemas.STATE_TRANSACTION) ?? []) as { operation: string; request: { key: string; value?: unknown; metadata?: Record<string, string> } }[];
      const ops: ActorStateOperation[] = body.map((o) => ({
        operation: o.operation,
        key: o.request.key,
        // stored as its JSON text, as the reference stores it
        value: o.operation.toLowerCase() === 'upsert' ? Buffer.from(JSON.stringify(o.request.value ?? null)) : undefined,
        metadata: o.request.metadata,
      }));
      await actors.transact(req.params.actorType, req.params.actorId, ops);
      return reply.status(204).send();
    };
    scope.post('/v1.0/actors/:actorType/:actorId/state', { schema: schemas.STATE_TRANSACTION }, transaction);
    scope.put('/v1.0/actors/:actorType/:actorId/state', { schema: schemas.STATE_TRANSACTION }, transaction);

    const timer = async (req: Req<{ name: string }>, reply: FastifyReply) => {
      const body = (jsonBody(req, schemas.TIMER_CREATE) ?? {}) as TimerRequest;
      await actors.createTimer(req.params.actorType, req.params.actorId, req.params.name, body);
      return reply.status(204).send();
    };
    scope.post('/v1.0/actors/:actorType/:actorId/timers/:name', { schema: schemas.TIMER_CREATE }, timer);
    scope.put('/v1.0/actors/:actorType/:actorId/timers/:name', { schema: schemas.TIMER_CREATE }, timer);
    scope.delete('/v1.0/actors/:actorType/:actorId/timers/:name', { schema: schemas.TIMER_DELETE }, async (req: Req<{ name: string }>, reply) => {
      await actors.deleteTimer(req.params.actorType, req.params.actorId, req.params.name);
      return reply.status(204).send();
    });

    const reminder = async (req: Req<{ name: string }>, reply: FastifyReply) => {
      await actors.createReminder(req.params.actorType, req.params.actorId, req.params.name, reminderRequestOf(jsonBody(req, schemas.REMINDER_CREATE)));
      return reply.status(204).send();
    };
    scope.post('/v1.0/actors/:actorType/:actorId/reminders/:name', { schema: schemas.REMINDER_CREATE }, reminder);
    scope.put('/v1.0/actors/:actorType/:actorId/reminders/:name', { schema: schemas.REMINDER_CREATE }, reminder);
    scope.get('/v1.0/actors/:actorType/:actorId/reminders/:name', { schema: schemas.REMINDER_GET }, async (req: Req<{ name: string }>) => {
      const r = await actors.getReminder(req.params.actorType, req.params.actorId, req.params.name);
      return { actorType: r.actorType, actorID: r.actorId, name: r.name, dueTime: r.dueTime, period: r.period, ttl: r.ttl, data: r.data };
    });
    scope.delete('/v1.0/actors/:actorType/:actorId/reminders/:name', { schema: schemas.REMINDER_DELETE }, async (req: Req<{ name: string }>, reply) => {
      await actors.deleteReminder(req.params.actorType, req.params.actorId, req.params.name);
      return reply.status(204).send();
    });
  });
}
