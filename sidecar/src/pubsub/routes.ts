/**
 * HTTP publish API:
 *   POST /v1.0/publish/<pubsub>/<topic>               body = the event (any content type)
 *   POST /v1.0-alpha1/publish/bulk/<pubsub>/<topic>   body = [{entryId, event, contentType?, metadata?}]
 * Request metadata comes as `metadata.<key>=<value>` query parameters (rawPayload, ttlInSeconds,
 * and whatever the component reads; http/query.ts). Schemas: schemas.ts.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isJsonType } from './cloudevent.ts';
import { errorBody } from '../http/errors.ts';
import { parseJsonText } from '../http/body.ts';
import { queryMetadata } from '../http/query.ts';
import { checkBody } from '../http/schema.ts';
import { rawBodyRoutes } from '../http/server.ts';
import * as schemas from './schemas.ts';
import type { BulkEntry, PublishService } from './publish.ts';

type Params = { Params: { pubsub: string; topic: string }; Querystring: Record<string, string | string[]> };

export async function publishRoutes(http: FastifyInstance, service: PublishService): Promise<void> {
  await rawBodyRoutes(http, (scope) => {
    // a child logger per request (for its request id) is a measurable share of a publish; it is
    // only worth it when debug lines, which carry it, are written
    scope.setChildLoggerFactory((logger, bindings, opts) => (logger.level === 'debug' || logger.level === 'trace' ? logger.child(bindings, opts) : logger));
    scope.post<Params>('/v1.0/publish/:pubsub/*', { schema: schemas.PUBLISH }, async (req, reply) => {
      const { pubsub, topic } = target(req);
      await service.publish({
        pubsubname: pubsub,
        topic,
        data: bodyOf(req),
        contentType: header(req, 'content-type'),
        metadata: queryMetadata(req.query) ?? {},
        traceparent: header(req, 'traceparent'),
        tracestate: header(req, 'tracestate'),
      });
      return reply.status(204).send();
    });
    scope.post<Params>('/v1.0-alpha1/publish/bulk/:pubsub/*', { schema: schemas.BULK_PUBLISH }, async (req, reply) => {
      const { pubsub, topic } = target(req);
      const body = bodyOf(req);
      // a view: no copy of the body; none is checked (and refused) as an empty body
      const list = body.length === 0 ? null : parseJsonText(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
      const failed = await service.bulkPublish({
        pubsubname: pubsub,
        topic,
        entries: bulkEntries(list),
        metadata: queryMetadata(req.query) ?? {},
        traceparent: header(req, 'traceparent'),
      });
      if (failed.length === 0) return reply.status(204).send();
      const message = `${failed.length} of the entries could not be published to topic "${topic}"`;
      return reply.status(500).send({ ...errorBody('ERR_PUBSUB_PUBLISH_MESSAGE', message), failedEntries: failed });
    });
  });
}

/** The topic is the rest of the path, so topics may hold '/'. */
function target(req: FastifyRequest<Params>): { pubsub: string; topic: string } {
  const params = req.params as Record<string, string>;
  return { pubsub: params.pubsub, topic: params['*'] ?? '' };
}

function bodyOf(req: FastifyRequest): Uint8Array {
  const b = req.body;
  if (b === undefined || b === null) return new Uint8Array();
  return Buffer.isBuffer(b) ? b : Buffer.from(String(b));
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

const MEMBERS = ['entryId', 'event', 'contentType', 'metadata'];
function canonical(k: string): string {
  return MEMBERS.find((m) => m.toLowerCase() === k.toLowerCase()) ?? k;
}

/** The entry with its member names canonical; the same object when they already are (the usual case). */
function canonicalKeys(e: Record<string, unknown>): Record<string, unknown> {
  for (const k in e) if (!MEMBERS.includes(k)) return Object.fromEntries(Object.entries(e).map(([k, v]) => [canonical(k), v]));
  return e;
}

/** The bulk body's entries as bytes: JSON events become their JSON text, strings their UTF-8. */
export function bulkEntries(list: unknown): BulkEntry[] {
  // JSON member names match case-insensitively, as clients of the ecosystem's API rely on (entryID)
  const entries = Array.isArray(list) ? list.map((e: unknown) => (typeof e === 'object' && e !== null && !Array.isArray(e) ? canonicalKeys(e as Record<string, unknown>) : e)) : list;
  checkBody(schemas.BULK_PUBLISH['x-body']!, entries);
  return (entries as BulkEntryJson[]).map((o) => {
    const contentType = o.contentType || (typeof o.event === 'string' ? 'text/plain' : 'application/json');
    let metadata = NO_METADATA;
    if (o.metadata) {
      metadata = {};
      // an own "__proto__" key stays a plain entry
      for (const [k, v] of Object.entries(o.metadata)) Object.defineProperty(metadata, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    if (typeof o.event === 'string' && !isJsonType(contentType)) return { entryId: o.entryId, data: Buffer.from(o.event), contentType, metadata };
    // the JSON value goes on as parsed: the envelope does not parse its text again
    return new JsonEntry(o.entryId, o.event ?? null, contentType, metadata);
  });
}

/** An entry as its schema lets it through. */
interface BulkEntryJson {
  entryId: string;
  event: unknown;
  contentType?: string | null;
  metadata?: Record<string, string> | null;
}

/** An entry without metadata shares this one (publishing only reads it). */
const NO_METADATA: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** A bulk entry whose event is a JSON value: its text made only when something asks (rawPayload). */
class JsonEntry implements BulkEntry {
  readonly entryId: string;
  readonly contentType: string;
  readonly metadata: Record<string, string>;
  readonly parsed: { value: unknown };
  private text?: Buffer;

  constructor(entryId: string, value: unknown, contentType: string, metadata: Record<string, string>) {
    this.entryId = entryId;
    this.parsed = { value };
    this.contentType = contentType;
    this.metadata = metadata;
  }

  get data(): Buffer {
    return (this.text ??= Buffer.from(JSON.stringify(this.parsed.value)));
  }
}
