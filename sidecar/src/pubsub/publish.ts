/**
 * Publishing, shared by the HTTP and gRPC APIs: checks, the CloudEvent envelope, the call to
 * the component, and the errors a caller sees. A request that passes the checks waits, before
 * it reaches the component, until the app's subscriptions are open (gate.ts).
 */
import type { ComponentRegistry } from '../components/registry.ts';
import type { BulkPublishEntry } from '../components/pubsub/types.ts';
import { ApiError, errorMessage, malformed } from '../http/errors.ts';
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';
import { CLOUDEVENT_CONTENT_TYPE, envelope, ttlOf, wrapJson, wrapsJson } from './cloudevent.ts';
import { PublishGate } from './gate.ts';
import { requirePubsub } from './lookup.ts';
import { endAfter, entryContexts, producerSpan } from '../tracing/outbound.ts';
import { contextHeaders, type TracingService } from '../tracing/service.ts';

export interface PublishRequest {
  pubsubname: string;
  topic: string;
  data: Uint8Array;
  contentType?: string;
  metadata: Record<string, string>;
  traceparent?: string;
  tracestate?: string;
}

export interface BulkEntry {
  entryId: string;
  data: Uint8Array;
  contentType?: string;
  metadata: Record<string, string>;
  /** `data` as a JSON value, when the caller has parsed it already. */
  parsed?: { value: unknown };
}

export interface BulkPublishRequest {
  pubsubname: string;
  topic: string;
  entries: BulkEntry[];
  metadata: Record<string, string>;
  traceparent?: string;
}

export interface FailedEntry {
  entryId: string;
  error: string;
}

/** Bulk requests past this many entries are a 400 (the state API's bound). */
export const MAX_BULK_ENTRIES = 10_000;

export class PublishService {
  private readonly components: ComponentRegistry;
  private readonly appId: string;
  private readonly gate: PublishGate;

  private readonly resiliency?: ResiliencyService;
  private readonly tracing?: TracingService;

  /** `tracing`: a PRODUCER span per publish, whose context the CloudEvents carry. */
  constructor(components: ComponentRegistry, appId: string, gate = new PublishGate(), resiliency?: ResiliencyService, tracing?: TracingService) {
    this.components = components;
    this.appId = appId;
    this.gate = gate;
    this.resiliency = resiliency;
    this.tracing = tracing;
  }

  /** A call to the pub/sub under its outbound policy; a 4xx of the component's own is not retried. */
  private outbound<T>(name: string, call: () => Promise<T>): Promise<T> {
    return componentCall(this.resiliency, this.components, name, 'Outbound', call);
  }

  async publish(req: PublishRequest): Promise<void> {
    if (!this.tracing) return this.publishNow(req);
    const span = producerSpan(this.tracing, req.pubsubname, req.topic, { traceparent: req.traceparent, tracestate: req.tracestate });
    return endAfter(span, () => this.publishNow({ ...req, ...contextHeaders(span) }));
  }

  private async publishNow(req: PublishRequest): Promise<void> {
    const pubsub = requirePubsub(this.components, req.pubsubname);
    checkTopic(req.topic);
    const { data, contentType } = envelope({ appId: this.appId, pubsubname: req.pubsubname, topic: req.topic, body: req.data, contentType: req.contentType, metadata: req.metadata, traceparent: req.traceparent, tracestate: req.tracestate });
    if (!this.gate.isOpen) await this.gate.wait();
    try {
      await this.outbound(req.pubsubname, () => pubsub.publish(req.topic, data, req.metadata, contentType));
    } catch (e) {
      // a component that judged the request itself bad (pubsub.mqtt3: a wildcard topic) says so with its own 4xx
      if (e instanceof ApiError) throw e;
      throw new ApiError(500, 'ERR_PUBSUB_PUBLISH_MESSAGE', `error publishing to topic "${req.topic}" of pub/sub "${req.pubsubname}": ${errorMessage(e)}`);
    }
  }

  /** Publishes every entry; returns the ones that failed (none: all published). */
  async bulkPublish(req: BulkPublishRequest): Promise<FailedEntry[]> {
    if (!this.tracing) return this.bulkPublishNow(req);
    const span = producerSpan(this.tracing, req.pubsubname, req.topic, { traceparent: req.traceparent }, req.entries.length, entryContexts(req.entries));
    const failed = await endAfter(span, () => this.bulkPublishNow({ ...req, traceparent: contextHeaders(span).traceparent }), (f) => (f.length ? `${f.length} of ${req.entries.length} entries failed` : undefined));
    return failed;
  }

  private async bulkPublishNow(req: BulkPublishRequest): Promise<FailedEntry[]> {
    const pubsub = requirePubsub(this.components, req.pubsubname);
    checkTopic(req.topic);
    if (req.entries.length > MAX_BULK_ENTRIES) throw malformed(`a bulk publish takes at most ${MAX_BULK_ENTRIES} entries; this one has ${req.entries.length}`);
    const seen = new Set<string>();
    const time = new Date().toISOString();
    // what the request's own metadata means, once: most entries have none of their own
    const base = { appId: this.appId, pubsubname: req.pubsubname, topic: req.topic, traceparent: req.traceparent, time };
    const ttl = ttlOf(req.metadata);
    const wrapped: BulkPublishEntry[] = req.entries.map((e, i) => {
      if (!e.entryId) throw malformed(`entries[${i}].entryId is required`);
      if (seen.has(e.entryId)) throw malformed(`entries[${i}].entryId "${e.entryId.slice(0, 80)}" is used twice; entry ids must be unique`);
      seen.add(e.entryId);
      const own = !isEmpty(e.metadata);
      if (!own && e.parsed && wrapsJson(e.contentType, req.metadata)) {
        return { entryId: e.entryId, event: wrapJson(base, e.contentType || 'text/plain', e.parsed.value, ttl), contentType: CLOUDEVENT_CONTENT_TYPE, metadata: req.metadata };
      }
      const metadata = own ? { ...req.metadata, ...e.metadata } : req.metadata;
      // `body` read only when the envelope needs the bytes (an entry's text may be made on demand)
      const env = envelope({
        appId: this.appId,
        pubsubname: req.pubsubname,
        topic: req.topic,
        get body() {
          return e.data;
        },
        contentType: e.contentType,
        metadata,
        traceparent: req.traceparent,
        parsed: e.parsed,
        time,
      });
      return { entryId: e.entryId, event: env.data, contentType: env.contentType, metadata };
    });
    if (!this.gate.isOpen) await this.gate.wait();
    if (pubsub.bulkPublish) {
      try {
        return await this.outbound(req.pubsubname, () => pubsub.bulkPublish!(req.topic, wrapped, req.metadata));
      } catch (e) {
        return wrapped.map((w) => ({ entryId: w.entryId, error: errorMessage(e) }));
      }
    }
    const results = await Promise.allSettled(wrapped.map((w) => this.outbound(req.pubsubname, () => pubsub.publish(req.topic, w.event, w.metadata, w.contentType))));
    return results.flatMap((r, i) => (r.status === 'rejected' ? [{ entryId: wrapped[i].entryId, error: errorMessage(r.reason) }] : []));
  }
}

function isEmpty(o: Record<string, string>): boolean {
  for (const _ in o) return false;
  return true;
}

function checkTopic(topic: string): void {
  if (!topic) throw new ApiError(404, 'ERR_TOPIC_NAME_EMPTY', 'the topic name is empty');
}
