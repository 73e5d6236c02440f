/**
 * The CloudEvents 1.0 envelope (JSON format) that published bodies travel in, and how a
 * received message is read back into one for routing and delivery. Every CloudEvent rt writes
 * has its attributes in sorted order, as the reference runtime writes them (it marshals a map):
 * `data` comes first, and SDK tests read the first value as the data.
 */
import { randomUUID } from 'node:crypto';
import { malformed } from '../http/errors.ts';
import { parseJsonText } from '../http/body.ts';

export const CLOUDEVENT_CONTENT_TYPE = 'application/cloudevents+json';
export const OCTET_STREAM = 'application/octet-stream';
/** `type` of events rt wraps itself (the ecosystem's is com.<product>.event.sent). */
export const EVENT_TYPE = 'rt.event.sent';

export type CloudEvent = Record<string, unknown> & { id: string; specversion: string; type: string; source: string };

export interface EnvelopeInput {
  appId: string;
  pubsubname: string;
  topic: string;
  body: Uint8Array;
  contentType?: string;
  /** request metadata (metadata.* query parameters or gRPC metadata). */
  metadata: Record<string, string>;
  traceparent?: string;
  tracestate?: string;
  /** the body already parsed (bulk publish parsed the whole request): not parsed again. */
  parsed?: { value: unknown };
  /** the event's `time` (ISO 8601): one for all entries of a bulk publish; now when absent. */
  time?: string;
}

export function isJsonType(ct: string | undefined): boolean {
  if (!ct) return false;
  if (ct === 'application/json') return true; // the usual case, without splitting (bulk publish asks per entry)
  const base = ct.split(';')[0].trim().toLowerCase();
  return base === 'application/json' || base.endsWith('+json') || base === 'text/json';
}

export function isCloudEventType(ct: string | undefined): boolean {
  if (ct === 'application/json' || ct === CLOUDEVENT_CONTENT_TYPE) return ct === CLOUDEVENT_CONTENT_TYPE;
  return (ct ?? '').split(';')[0].trim().toLowerCase() === CLOUDEVENT_CONTENT_TYPE;
}

/** metadata.ttlInSeconds as a positive whole number of seconds, or undefined; 400 when wrong. */
export function ttlOf(metadata: Record<string, string>): number | undefined {
  const raw = metadata.ttlInSeconds;
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d{1,10}$/.test(raw) || Number(raw) <= 0) throw malformed(`metadata.ttlInSeconds "${raw.slice(0, 40)}" must be a positive whole number of seconds`);
  return Number(raw);
}

export function isRawPayload(metadata: Record<string, string>): boolean {
  return (metadata.rawPayload ?? '').toLowerCase() === 'true';
}

/**
 * A rawPayload subscription that asks (metadata `rawPayloadAsBody: "true"`, rt's own) for each
 * message's bytes as the HTTP body, with the content type they were published with, instead of
 * the CloudEvent that wraps them: what rt delivered before, for plain HTTP apps that want bytes.
 */
export function isRawBody(metadata: Record<string, string>): boolean {
  return isRawPayload(metadata) && (metadata.rawPayloadAsBody ?? '').toLowerCase() === 'true';
}

/**
 * The bytes to hand to the component for one published body: the body itself with
 * rawPayload=true; a CloudEvent the caller sent, completed with what routing needs, its `topic`
 * and `pubsubname` set to this publish's; otherwise a new CloudEvent around the body. Throws 400
 * when a JSON body does not parse.
 */
export function envelope(input: EnvelopeInput): { data: Buffer; contentType: string } {
  const ttl = ttlOf(input.metadata);
  const contentType = input.contentType || 'text/plain';
  if (isRawPayload(input.metadata)) return { data: Buffer.from(input.body), contentType };
  const text = () => Buffer.from(input.body).toString('utf8');
  if (!isCloudEventType(input.contentType) && isJsonType(contentType)) {
    // a JSON body: the CloudEvent written as text around the parsed value, no event object to stringify
    const value = input.parsed ? input.parsed.value : input.body.length > 0 ? parseJsonText(text(), 'request body') : undefined;
    return { data: Buffer.from(wrapParsed(input, contentType, value, ttl)), contentType: CLOUDEVENT_CONTENT_TYPE };
  }
  let event: Record<string, unknown>;
  if (isCloudEventType(input.contentType)) {
    const parsed = parseJsonText(text(), 'CloudEvent body');
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw malformed('a body sent as application/cloudevents+json must be a JSON object');
    event = parsed as Record<string, unknown>;
    // what the caller set stays; what routing and tracing need is filled in when missing
    event.id ??= randomUUID();
    event.specversion ??= '1.0';
    event.source ??= input.appId;
    event.type ??= EVENT_TYPE;
  } else {
    event = { specversion: '1.0', id: randomUUID(), source: input.appId, type: EVENT_TYPE, datacontenttype: contentType };
    if (contentType.startsWith('text/')) {
      event.data = text();
    } else {
      event.data_base64 = Buffer.from(input.body).toString('base64');
    }
    event.time = new Date().toISOString();
  }
  // where it travels is this publish's topic and pub/sub, whatever a CloudEvent passed on from
  // elsewhere still names (the reference runtime overwrites them too)
  event.topic = input.topic;
  event.pubsubname = input.pubsubname;
  if (input.traceparent) {
    event.traceparent ??= input.traceparent;
    event.traceid ??= input.traceparent;
  }
  if (input.tracestate) event.tracestate ??= input.tracestate;
  if (ttl !== undefined) event.expiration = new Date(Date.now() + ttl * 1000).toISOString();
  return { data: Buffer.from(sortedJson(event)), contentType: CLOUDEVENT_CONTENT_TYPE };
}

/** The event as JSON with its attributes in sorted order (`data` keeps its own member order). */
export function sortedJson(event: Record<string, unknown>): string {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(event).sort()) Object.defineProperty(out, k, { value: event[k], enumerable: true, writable: true, configurable: true });
  return JSON.stringify(out);
}

/**
 * Whether envelope() of a body with this content type and metadata is wrapJson() of its parsed
 * value: a JSON body that is not a CloudEvent, without rawPayload. (Bulk publish asks once per
 * request for the shared metadata and calls wrapJson per entry.)
 */
export function wrapsJson(contentType: string | undefined, metadata: Record<string, string>): boolean {
  return !isRawPayload(metadata) && !isCloudEventType(contentType) && isJsonType(contentType || 'text/plain');
}

/**
 * The new CloudEvent around an already parsed JSON value, written as text directly: the same
 * members in the same (sorted) order as the general path in envelope(), without an object per
 * entry (bulk publish wraps thousands at a time). `ttl`: ttlOf(input.metadata).
 */
export function wrapJson(input: Omit<EnvelopeInput, 'body' | 'parsed' | 'metadata'>, contentType: string, value: unknown, ttl: number | undefined): Buffer {
  return Buffer.from(wrapParsed(input, contentType, value, ttl));
}

function wrapParsed(input: Omit<EnvelopeInput, 'body' | 'parsed' | 'metadata'>, contentType: string, value: unknown, ttl: number | undefined): string {
  const q = JSON.stringify;
  // sorted: data, datacontenttype, expiration, id, pubsubname, source, specversion, time, topic, traceid, traceparent, tracestate, type
  let json = `{${value === undefined ? '' : `"data":${q(value)},`}"datacontenttype":${q(contentType)},`;
  if (ttl !== undefined) json += `"expiration":"${new Date(Date.now() + ttl * 1000).toISOString()}",`;
  json += `"id":"${randomUUID()}","pubsubname":${q(input.pubsubname)},"source":${q(input.appId)},"specversion":"1.0","time":"${input.time ?? new Date().toISOString()}","topic":${q(input.topic)},`;
  if (input.traceparent) json += `"traceid":${q(input.traceparent)},"traceparent":${q(input.traceparent)},`;
  if (input.tracestate) json += `"tracestate":${q(input.tracestate)},`;
  return `${json}"type":"${EVENT_TYPE}"}`;
}

/** The bytes a received CloudEvent arrived as, kept when reading did not change it. */
const ORIGINAL = Symbol('original bytes');

/** The event as JSON text: the bytes it arrived in when unchanged (no second stringify per delivery). */
export function eventJson(event: CloudEvent): string | Buffer {
  return (event as { [ORIGINAL]?: Buffer })[ORIGINAL] ?? sortedJson(event);
}

/**
 * A received message as a CloudEvent. Messages that are not one (raw payloads, other
 * publishers) are wrapped, their bytes in data_base64, so the app always gets a CloudEvent.
 */
export function readEvent(data: Uint8Array, ctx: { topic: string; pubsubname: string; contentType?: string }): CloudEvent {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (buf.length > 0 && buf[0] === 0x7b /* { */) {
    try {
      const o = JSON.parse(buf.toString('utf8')) as Record<string, unknown>;
      if (typeof o === 'object' && o !== null && typeof o.specversion === 'string' && typeof o.id === 'string') {
        if (o.topic === undefined || o.pubsubname === undefined) {
          o.topic ??= ctx.topic;
          o.pubsubname ??= ctx.pubsubname;
        } else {
          Object.defineProperty(o, ORIGINAL, { value: buf, enumerable: false });
        }
        return o as CloudEvent;
      }
    } catch {
      // not JSON: wrapped below
    }
  }
  return wrapBytes(buf, ctx.contentType || OCTET_STREAM, ctx);
}

/** A new CloudEvent around bytes that are not one (data_base64), its attributes in sorted order. */
function wrapBytes(buf: Buffer, contentType: string, ctx: { topic: string; pubsubname: string }): CloudEvent {
  return { data_base64: buf.toString('base64'), datacontenttype: contentType, id: randomUUID(), pubsubname: ctx.pubsubname, source: ctx.pubsubname, specversion: '1.0', topic: ctx.topic, type: EVENT_TYPE };
}

/** A message as published (bytes and content type), read by a subscription with rawPayload. */
export interface RawPayload {
  data: Buffer;
  contentType: string;
}

const RAW = Symbol('raw payload');

/**
 * A message for a rawPayload subscription: a CloudEvent that wraps the bytes whatever they are
 * (even a CloudEvent), as `data_base64` with `datacontenttype` application/octet-stream, as the
 * reference runtime builds it. Routing reads it and the app gets it; the bytes and the content
 * type they were published with stay attached, for the dead-letter topic and for a subscription
 * that asks for the bytes as the body (rawPayloadAsBody).
 */
export function rawEvent(data: Uint8Array, ctx: { topic: string; pubsubname: string; contentType?: string }): CloudEvent {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const event = wrapBytes(buf, OCTET_STREAM, ctx);
  Object.defineProperty(event, RAW, { value: { data: buf, contentType: ctx.contentType || OCTET_STREAM } satisfies RawPayload, enumerable: false });
  return event;
}

/** The message as published, when its subscription asked for rawPayload. */
export function rawPayloadOf(event: CloudEvent): RawPayload | undefined {
  return (event as { [RAW]?: RawPayload })[RAW];
}

/** The event's expiration (metadata.ttlInSeconds at publish) has passed. */
export function expired(event: CloudEvent, now = Date.now()): boolean {
  const e = event.expiration;
  if (typeof e !== 'string') return false;
  const t = Date.parse(e);
  return Number.isFinite(t) && t <= now;
}
