/**
 * Pub/sub toward an app that speaks gRPC (--app-protocol grpc): the app's AppCallback service
 * lists its programmatic subscriptions (ListTopicSubscriptions) and takes each event
 * (OnTopicEvent, the chosen route in `path`); bulk subscriptions go through
 * AppCallbackAlpha.OnBulkTopicEventAlpha1. Both calls carry the pub/sub's name as metadata
 * `pubsubname`. The answer's status means what it means over HTTP:
 * SUCCESS, RETRY or DROP. A call that fails is RETRY, except UNIMPLEMENTED: the app has no
 * handler, retrying cannot help, and the message is acknowledged without going to the
 * dead-letter topic (as the reference runtime does; an answered DROP goes there). An app without
 * the bulk method gets the batch's events one by one through OnTopicEvent.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { grpcCode, UNIMPLEMENTED, type GrpcApp } from '../app/grpc-app.ts';
import type { SubscriptionInfo } from '../resources/types.ts';
import { rawPayloadOf, type CloudEvent } from './cloudevent.ts';
import { BulkSender, type BatchEntry, type BatchPoster } from './bulk.ts';
import { topicEvent } from './streaming.ts';
import type { AppTargets, Outcome } from './types.ts';
import { consumerSpan, tracedBatches } from '../tracing/messaging.ts';
import type { TracingService } from '../tracing/service.ts';

const STATUS: Record<number, Outcome> = { 0: 'SUCCESS', 1: 'RETRY', 2: 'DROP' };

interface ListedSubscription {
  pubsub_name: string;
  topic: string;
  metadata: Record<string, string> | null;
  routes: { rules: { match: string; path: string }[]; default: string } | null;
  dead_letter_topic: string;
  bulk_subscribe: { enabled: boolean; max_messages_count: number; max_await_duration_ms: number } | null;
}

/** The app's programmatic subscriptions (none when it does not implement the method). */
export async function listGrpcSubscriptions(app: GrpcApp, log: Logger): Promise<SubscriptionInfo[]> {
  let res: { subscriptions?: ListedSubscription[] };
  try {
    res = (await app.call('callback', 'ListTopicSubscriptions', {})) as typeof res;
  } catch (e) {
    if (grpcCode(e) !== UNIMPLEMENTED) log.warn(`asking the gRPC app for its subscriptions (ListTopicSubscriptions): ${(e as Error).message}`);
    return [];
  }
  return (res.subscriptions ?? []).flatMap((s): SubscriptionInfo[] => {
    if (!s.pubsub_name || !s.topic) return [];
    const rules = (s.routes?.rules ?? []).filter((r) => r.path).map((r) => ({ match: r.match, path: r.path }));
    if (s.routes?.default) rules.push({ match: '', path: s.routes.default });
    // no route at all: OnTopicEvent still gets the events, with an empty path
    if (rules.length === 0) rules.push({ match: '', path: '' });
    const b = s.bulk_subscribe;
    const bulk = b?.enabled ? { bulkSubscribe: { enabled: true, maxMessagesCount: b.max_messages_count || undefined, maxAwaitDurationMs: b.max_await_duration_ms || undefined } } : {};
    return [{ pubsubname: s.pubsub_name, topic: s.topic, metadata: { ...(s.metadata ?? {}) }, rules, deadLetterTopic: s.dead_letter_topic, type: 'PROGRAMMATIC', ...bulk }];
  });
}

/** Call metadata of a delivery: the pub/sub's name (`pubsubname`, as the reference runtime sends it) and the trace context. */
function metadataOf(event: CloudEvent, sub: SubscriptionInfo): Record<string, string> {
  const out: Record<string, string> = { pubsubname: sub.pubsubname };
  if (typeof event.traceparent === 'string') out.traceparent = event.traceparent;
  if (typeof event.tracestate === 'string') out.tracestate = event.tracestate;
  return out;
}

async function sendOne(app: GrpcApp, path: string, event: CloudEvent, sub: SubscriptionInfo, log: Logger, tracing?: TracingService): Promise<Outcome> {
  const md = metadataOf(event, sub);
  // tracing on: a CONSUMER span under the event's context, and the app gets the span's context
  const span = tracing ? consumerSpan(tracing, event, sub, path, md) : undefined;
  try {
    const res = (await app.call('callback', 'OnTopicEvent', topicEvent(event, path, sub), md)) as { status?: number };
    const outcome = STATUS[res.status ?? 0] ?? 'RETRY';
    span?.setAttributes({ 'rt.outcome': outcome });
    span?.end(outcome === 'RETRY' ? 'the app answered RETRY' : undefined);
    if (outcome !== 'SUCCESS') log.debug({ path, outcome, id: event.id }, 'app did not take the message');
    return outcome;
  } catch (e) {
    span?.end((e as Error).message);
    if (grpcCode(e) === UNIMPLEMENTED) {
      log.warn({ path, id: event.id }, 'the gRPC app does not implement OnTopicEvent: message acknowledged unhandled');
      return 'SUCCESS';
    }
    log.warn({ path, id: event.id }, `delivering message over gRPC: ${(e as Error).message}`);
    return 'RETRY';
  }
}

function bulkPoster(app: GrpcApp, info: SubscriptionInfo, log: Logger, tracing?: TracingService): BatchPoster {
  let bulkUnimplemented = false;
  const oneByOne = async (path: string, entries: BatchEntry[]) => new Map(await Promise.all(entries.map(async (e) => [e.entryId, await sendOne(app, path, e.event, info, log, tracing)] as const)));
  return async (path, entries) => {
    if (bulkUnimplemented) return oneByOne(path, entries);
    const req = {
      id: randomUUID(),
      entries: entries.map((e) => {
        const raw = rawPayloadOf(e.event);
        if (raw) return { entry_id: e.entryId, bytes: raw.data, content_type: raw.contentType, metadata: {} };
        const t = topicEvent(e.event, path, info);
        return { entry_id: e.entryId, cloud_event: { id: t.id, source: t.source, type: t.type, spec_version: t.spec_version, data_content_type: t.data_content_type, data: t.data, extensions: t.extensions }, content_type: 'application/cloudevents+json', metadata: {} };
      }),
      metadata: info.metadata,
      topic: info.topic,
      pubsub_name: info.pubsubname,
      type: 'rt.event.sent.bulk',
      path,
    };
    try {
      const res = (await app.call('alpha', 'OnBulkTopicEventAlpha1', req, { pubsubname: info.pubsubname })) as { statuses?: { entry_id: string; status?: number }[] };
      return new Map((res.statuses ?? []).map((s) => [s.entry_id, STATUS[s.status ?? 0] ?? 'RETRY']));
    } catch (e) {
      if (grpcCode(e) === UNIMPLEMENTED) {
        bulkUnimplemented = true;
        log.info({ topic: info.topic }, 'the gRPC app has no OnBulkTopicEventAlpha1: bulk messages go one by one through OnTopicEvent');
        return oneByOne(path, entries);
      }
      log.warn({ path, entries: entries.length }, `bulk delivery over gRPC: ${(e as Error).message}`);
      return 'RETRY';
    }
  };
}

/** Delivery to an app that speaks gRPC. */
export function grpcTargets(app: GrpcApp, log: Logger, tracing?: TracingService): AppTargets {
  return {
    single: { send: (path, event, sub) => sendOne(app, path, event, sub, log, tracing) },
    bulk: (info, bulk) => new BulkSender(tracing ? tracedBatches(tracing, info, bulkPoster(app, info, log, tracing)) : bulkPoster(app, info, log, tracing), bulk),
  };
}
