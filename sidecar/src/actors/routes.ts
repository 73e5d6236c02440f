/**
 * The actor HTTP API, as the reference runtime serves it and the SDKs call it:
 *   GET|POST|PUT|DELETE /v1.0/actors/<type>/<id>/method/<m>   → the app's answer as it gave it
 *   GET  /v1.0/actors/<type>/<id>/state/<key>                → 200 the value, 204 none
 *   POST|PUT /v1.0/actors/<type>/<id>/state                  [{operation, request: {key, value, metadata}}] → 204
 *   POST|PUT /v1.0/actors/<type>/<id>/timers/<name>          {dueTime, period, ttl, data, callback} → 204
 *   DELETE   /v1.0/actors/<type>/<id>/timers/<name>          → 204
 *   POST|PUT /v1.0/actors/<type>/<id>/reminders/<name>       {dueTime, period, ttl, data} → 204
 *   GET      /v1.0/actors/<type>/<id>/reminders/<name>       → 200 the reminder
 *   DELETE   /v1.0/actors/<type>/<id>/reminders/<name>       → 204
 * Bodies reach the routes as bytes (any content type); JSON ones are parsed and checked here
 * against schemas.ts. Checks and errors: service.ts.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseJsonText } from '../http/body.ts';
import { checkBody, type JsonSchema, type RouteSchema } from '../http/schema.ts';
import { rawBodyRoutes } from '../http/server.ts';
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

export async function actorRoutes(http: FastifyInstance, actors: ActorsService): Promise<void> {
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

    const transaction = async (req: Req<object>, reply: import('fastify').FastifyReply) => {
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

    const timer = async (req: Req<{ name: string }>, reply: import('fastify').FastifyReply) => {
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

    const reminder = async (req: Req<{ name: string }>, reply: import('fastify').FastifyReply) => {
      const body = (jsonBody(req, schemas.REMINDER_CREATE) ?? {}) as TimerRequest;
      await actors.createReminder(req.params.actorType, req.params.actorId, req.params.name, body);
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
