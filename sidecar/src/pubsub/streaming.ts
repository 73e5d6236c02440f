/**
 * STREAMING subscriptions: the app opens SubscribeTopicEventsAlpha1 (gRPC, bidirectional), sends
 * an initial request (pub/sub, topic, metadata, dead-letter topic), then answers every event it
 * is sent with event_processed {id, status}. The sidecar subscribes on the component for as long
 * as the stream lives, with the same delivery rules as the other kinds (retries, dead letter,
 * at-least-once); an event still unanswered when the stream ends is given back to the component.
 * Refusals end the stream with a status that carries the error code (an unknown pub/sub:
 * INVALID_ARGUMENT ERR_PUBSUB_NOT_FOUND, as the reference runtime answers).
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { ComponentRegistry } from '../components/registry.ts';
import type { PubSub } from '../components/pubsub/types.ts';
import { GrpcError, toStatus } from '../grpc/runtime/errors.ts';
import type { ApiError } from '../http/errors.ts';
import type { SubscriptionInfo } from '../resources/types.ts';
import { isJsonType, type CloudEvent } from './cloudevent.ts';
import { DEFAULT_RETRY } from './delivery.ts';
import type { Outcome } from './types.ts';
import { requirePubsub } from './lookup.ts';
import { messageHandler } from './subscriptions.ts';

interface InitialRequest {
  pubsub_name: string;
  topic: string;
  metadata: Record<string, string> | null;
  dead_letter_topic?: string;
}

interface StreamRequest {
  initial_request?: InitialRequest | null;
  event_processed?: { id: string; status?: { status?: number } | null } | null;
}

type Stream = grpc.ServerDuplexStream<StreamRequest, unknown>;

const STATUS: Record<number, Outcome> = { 0: 'SUCCESS', 1: 'RETRY', 2: 'DROP' };
/** The attributes TopicEventRequest has fields for; every other one goes in `extensions`. */
const CE_FIELDS = new Set(['id', 'source', 'type', 'specversion', 'datacontenttype', 'data', 'data_base64']);

/**
 * The CloudEvent as the proto's TopicEventRequest: data as bytes, other attributes as
 * extensions; for a rawPayload subscription data holds the message's bytes as published (the
 * event's data_base64), with data_content_type application/octet-stream, as the reference
 * runtime sends them.
 * `topic` and `pubsub_name` are those of the subscription that delivers it (the SDKs dispatch on
 * them), not the event's own attributes: a dead-letter copy still names the topic it failed on,
 * a CloudEvent from another publisher may name anything. The event's own `topic`/`pubsubname`
 * stay readable in `extensions`, as the reference runtime sends them.
 */
export function topicEvent(e: CloudEvent, path: string, sub: Pick<SubscriptionInfo, 'topic' | 'pubsubname'>): Record<string, unknown> {
  const fields: Record<string, { stringValue: string }> = {};
  for (const [k, v] of Object.entries(e)) if (!CE_FIELDS.has(k) && (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')) fields[k] = { stringValue: String(v) };
  return {
    id: e.id,
    source: e.source,
    type: e.type,
    spec_version: e.specversion,
    data_content_type: typeof e.datacontenttype === 'string' ? e.datacontenttype : '',
    topic: sub.topic,
    data: eventData(e),
    pubsub_name: sub.pubsubname,
    path,
    extensions: { fields },
  };
}

/**
 * The bytes of a CloudEvent's data as a gRPC subscriber gets them (TopicEventRequest.data, a bulk
 * entry's cloud_event.data), by the rules of the reference runtime, so that they decode to what
 * an HTTP subscriber reads in the JSON body's `data`:
 * - `data_base64`: the decoded bytes;
 * - a JSON `datacontenttype` (`application/json`, any `+json`, `text/json`): the JSON encoding of
 *   `data`, so a string keeps its quotes (`"hello"`, as published) and decodes as a string;
 * - any other type: a string's own bytes (`text/*`, `application/xml`, …); a value that is not a
 *   string (a CloudEvent without `datacontenttype`, say) its JSON;
 * - no `data`: no bytes.
 */
export function eventData(e: CloudEvent): Buffer {
  if (typeof e.data_base64 === 'string') return Buffer.from(e.data_base64, 'base64');
  const d = e.data;
  if (d === undefined) return Buffer.alloc(0);
  if (typeof d === 'string' && !isJsonType(typeof e.datacontenttype === 'string' ? e.datacontenttype : undefined)) return Buffer.from(d);
  return Buffer.from(JSON.stringify(d));
}

export class StreamingSubscriptions {
  private readonly open = new Set<SubscriptionInfo>();
  private readonly components: ComponentRegistry;
  private readonly log: Logger;

  constructor(components: ComponentRegistry, log: Logger) {
    this.components = components;
    this.log = log;
  }

  list(): SubscriptionInfo[] {
    return [...this.open];
  }

  /** Serves one SubscribeTopicEventsAlpha1 stream. */
  serve(call: Stream): void {
    let info: SubscriptionInfo | undefined;
    let close: (() => void) | undefined;
    const state = { closed: false };
    const waiting = new Map<string, (o: Outcome) => void>();
    const fail = (code: grpc.status, errorCode: string, details: string) => {
      if (!state.closed) call.emit('error', toStatus(new GrpcError(code, errorCode, details)));
      end();
    };
    const end = () => {
      if (state.closed) return;
      state.closed = true;
      close?.();
      if (info) this.open.delete(info);
      for (const r of waiting.values()) r('RETRY');
      waiting.clear();
    };
    call.on('data', (req: StreamRequest) => {
      if (state.closed) return;
      if (req.initial_request) {
        if (info) return fail(grpc.status.INVALID_ARGUMENT, 'ERR_MALFORMED_REQUEST', 'the stream was already initialised; send event_processed messages only');
        const init = req.initial_request;
        let pubsub: PubSub;
        try {
          pubsub = requirePubsub(this.components, init.pubsub_name);
        } catch (e) {
          return fail(grpc.status.INVALID_ARGUMENT, (e as ApiError).errorCode, (e as ApiError).message);
        }
        if (!init.topic) return fail(grpc.status.INVALID_ARGUMENT, 'ERR_TOPIC_NAME_EMPTY', 'initial_request.topic is required');
        const sub: SubscriptionInfo = { pubsubname: init.pubsub_name, topic: init.topic, metadata: { ...(init.metadata ?? {}) }, rules: [], deadLetterTopic: init.dead_letter_topic ?? '', type: 'STREAMING' };
        info = sub;
        const target = {
          send: (path: string, event: CloudEvent) =>
            new Promise<Outcome>((resolve) => {
              if (state.closed) return resolve('RETRY');
              waiting.set(event.id, resolve);
              call.write({ event_message: topicEvent(event, path, sub) });
            }),
        };
        // no rules: everything goes to the stream (path '')
        const handler = messageHandler(sub, [{ match: '', path: '' }], pubsub, target, DEFAULT_RETRY, state, this.log);
        try {
          close = pubsub.subscribe(sub.topic, sub.metadata, handler).close;
        } catch (e) {
          return fail(grpc.status.INTERNAL, 'ERR_PUBSUB_SUBSCRIBE', `subscribing to ${sub.pubsubname}/${sub.topic}: ${(e as Error).message}`);
        }
        this.open.add(sub);
        call.write({ initial_response: {} });
        this.log.info({ pubsub: sub.pubsubname, topic: sub.topic }, 'streaming subscription opened');
        return;
      }
      if (req.event_processed) {
        if (!info) return fail(grpc.status.INVALID_ARGUMENT, 'ERR_MALFORMED_REQUEST', 'send initial_request first');
        const { id, status } = req.event_processed;
        const resolve = waiting.get(id);
        if (!resolve) return; // an answer to nothing we wait for (late, or twice): ignored
        waiting.delete(id);
        resolve(STATUS[status?.status ?? 0] ?? 'RETRY');
        return;
      }
      fail(grpc.status.INVALID_ARGUMENT, 'ERR_MALFORMED_REQUEST', 'each message needs initial_request or event_processed');
    });
    call.on('end', () => {
      end();
      call.end();
    });
    call.on('error', end);
    call.on('cancelled', end);
  }
}
