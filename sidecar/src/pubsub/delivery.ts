/**
 * Delivery of one message to the app and what its answer means.
 *
 * The app answers with an HTTP status and, optionally, {"status": "SUCCESS" | "RETRY" | "DROP"}:
 * 2xx without a status (or an unreadable body) is SUCCESS; 404 is DROP (the app has no such
 * route, retrying cannot help); any other status, an unknown status word, or no answer is RETRY.
 * RETRY is tried again with exponential backoff; when the attempts are spent the message goes to
 * the dead-letter topic if there is one, else it is given back to the component, which delivers
 * it again later (at-least-once). DROP is acknowledged, and sent to the dead-letter topic if
 * there is one (subscriptions.ts).
 */
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import type { CloudEvent } from './cloudevent.ts';
import type { SubscriptionInfo } from '../resources/types.ts';
import { CLOUDEVENT_CONTENT_TYPE, eventJson, isRawBody, rawPayloadOf } from './cloudevent.ts';
import { BulkSender, httpBatchPoster } from './bulk.ts';
import { Backoff, wait } from '../../../shared/backoff.ts';
import type { AppTargets, Outcome, RetryPolicy } from './types.ts';
import { consumerSpan, tracedBatches } from '../tracing/messaging.ts';
import type { TracingService } from '../tracing/service.ts';

/** 3 retries, 250 ms apart doubling to 5 s. */
export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, initialMs: 250, maxMs: 5000 };

export function outcomeOf(status: number, body: Buffer): Outcome {
  if (status === 404) return 'DROP';
  if (status < 200 || status >= 300) return 'RETRY';
  if (body.length === 0) return 'SUCCESS';
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return 'SUCCESS';
  }
  if (typeof parsed !== 'object' || parsed === null || !('status' in parsed)) return 'SUCCESS';
  const s = String((parsed as { status: unknown }).status).toUpperCase();
  if (s === '' || s === 'SUCCESS') return 'SUCCESS';
  if (s === 'DROP') return 'DROP';
  return 'RETRY';
}

/**
 * One attempt: POSTs the CloudEvent (or, for a rawPayloadAsBody subscription, the raw bytes) to
 * `path` on the app, with the pub/sub's name in the `pubsubname` header, as the reference
 * runtime sends it (the SDKs hand it to the handler).
 */
export async function sendToApp(app: AppChannel, path: string, event: CloudEvent, sub: SubscriptionInfo, log: Logger, signal?: AbortSignal, tracing?: TracingService): Promise<Outcome> {
  const raw = isRawBody(sub.metadata) ? rawPayloadOf(event) : undefined;
  const headers: Record<string, string> = { 'content-type': raw ? raw.contentType : CLOUDEVENT_CONTENT_TYPE, pubsubname: sub.pubsubname };
  if (typeof event.traceparent === 'string') headers.traceparent = event.traceparent;
  if (typeof event.tracestate === 'string') headers.tracestate = event.tracestate;
  // tracing on: a CONSUMER span under the event's context, and the app gets the span's context
  const span = tracing ? consumerSpan(tracing, event, sub, path, headers) : undefined;
  try {
    const res = await app.invoke({ method: 'POST', path, body: raw ? raw.data : eventJson(event), headers, signal });
    const outcome = outcomeOf(res.status, res.body);
    span?.setAttributes({ 'http.response.status_code': res.status, 'rt.outcome': outcome });
    span?.end(outcome === 'RETRY' ? `the app answered ${res.status}: RETRY` : undefined);
    if (outcome !== 'SUCCESS') log.debug({ path, status: res.status, outcome, id: event.id }, 'app did not take the message');
    return outcome;
  } catch (e) {
    span?.end((e as Error).message);
    log.warn({ path, id: event.id }, `delivering message: ${(e as Error).message}`);
    return 'RETRY';
  }
}

/** Delivery to an app that speaks HTTP: one POST per message, bulk batches as one POST. */
export function httpTargets(app: AppChannel, log: Logger, tracing?: TracingService): AppTargets {
  return {
    single: { send: (path, event, sub, signal) => sendToApp(app, path, event, sub, log, signal, tracing) },
    bulk: (info, bulk) => new BulkSender(tracing ? tracedBatches(tracing, info, httpBatchPoster(app, info, log)) : httpBatchPoster(app, info, log), bulk),
  };
}

/**
 * Tries `attempt` until it is not RETRY or the policy is spent; returns the last outcome.
 * Stops early (RETRY) when `stopped` says the subscription is closing. `first`: the outcome of a
 * first attempt the caller already made.
 */
export async function withRetries(attempt: () => Promise<Outcome>, policy: RetryPolicy, stopped: () => boolean, first?: Outcome): Promise<Outcome> {
  let backoff: Backoff | undefined;
  for (let i = 0; ; i++) {
    const o = i === 0 && first !== undefined ? first : await attempt();
    if (o !== 'RETRY' || i >= policy.maxRetries || stopped()) return o;
    await wait((backoff ??= new Backoff(policy)).next());
  }
}
