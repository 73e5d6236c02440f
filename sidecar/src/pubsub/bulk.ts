/**
 * bulkSubscribe: messages for one path are gathered into batches (up to maxMessagesCount, or
 * what arrived within maxAwaitDurationMs) and POSTed to the app at once, with the pub/sub's name
 * in the `pubsubname` header and the members in the reference runtime's order:
 *   {entries: [{entryId, event, metadata, contentType}], id, metadata, pubsubname, topic, type}
 * An entry's event is the CloudEvent; for a rawPayload subscription the base64 of the message's
 * bytes, with contentType application/octet-stream (the SDKs decode the base64 for that type).
 * The app answers {"statuses": [{entryId, status}]}: each entry gets its own SUCCESS, RETRY or
 * DROP (an entry it does not name is RETRY). A non-2xx answer counts for every entry: 404 (no
 * such route) acknowledges them without the dead-letter topic, as the reference runtime does,
 * anything else is RETRY. Each message then goes through the usual retries and dead letter (a
 * DROP entry goes there too), so a retried entry simply joins a later batch. Apps speaking gRPC
 * get the batch through OnBulkTopicEventAlpha1 instead (grpc-app.ts): BulkSender only gathers, a
 * BatchPoster sends.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import type { BulkSubscribe, SubscriptionInfo } from '../resources/types.ts';
import { CLOUDEVENT_CONTENT_TYPE, eventJson, OCTET_STREAM, rawPayloadOf, type CloudEvent } from './cloudevent.ts';
import type { MessageTarget, Outcome } from './types.ts';

export const BULK_EVENT_TYPE = 'rt.event.sent.bulk';

interface Waiting {
  entryId: string;
  event: CloudEvent;
  resolve: (o: Outcome) => void;
}

export interface BatchEntry {
  entryId: string;
  event: CloudEvent;
}

/**
 * Sends one batch to the app's `path`: each entry's outcome, or one outcome for all (an app
 * that failed the whole call). An entry missing from the map is RETRY.
 */
export type BatchPoster = (path: string, entries: BatchEntry[]) => Promise<Map<string, Outcome> | Outcome>;

export class BulkSender implements MessageTarget {
  private readonly batches = new Map<string, { entries: Waiting[]; timer: NodeJS.Timeout }>();
  private readonly max: number;
  private readonly waitMs: number;
  private readonly post: BatchPoster;

  constructor(post: BatchPoster, bulk: BulkSubscribe) {
    this.post = post;
    this.max = bulk.maxMessagesCount ?? 100;
    this.waitMs = bulk.maxAwaitDurationMs ?? 1000;
  }

  send(path: string, event: CloudEvent): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      let b = this.batches.get(path);
      if (!b) {
        b = { entries: [], timer: setTimeout(() => void this.flush(path), this.waitMs) };
        this.batches.set(path, b);
      }
      // entry ids need only be unique within their batch: its position says it, no UUID per message
      b.entries.push({ entryId: String(b.entries.length), event, resolve });
      if (b.entries.length >= this.max) void this.flush(path);
    });
  }

  private async flush(path: string): Promise<void> {
    const b = this.batches.get(path);
    if (!b) return;
    this.batches.delete(path);
    clearTimeout(b.timer);
    let outcomes: Map<string, Outcome> | Outcome;
    try {
      outcomes = await this.post(path, b.entries);
    } catch {
      outcomes = 'RETRY';
    }
    for (const e of b.entries) e.resolve(typeof outcomes === 'string' ? outcomes : (outcomes.get(e.entryId) ?? 'RETRY'));
  }

  /** Sends what is gathered now (the subscription closes). */
  close(): void {
    for (const path of [...this.batches.keys()]) void this.flush(path);
  }
}

const ENTRY_TAIL = Buffer.from(`,"metadata":{},"contentType":"${CLOUDEVENT_CONTENT_TYPE}"}`);
/** A raw entry's tail: its `event` is base64, which the SDKs decode for this type only. */
const RAW_ENTRY_TAIL = Buffer.from(`,"metadata":{},"contentType":"${OCTET_STREAM}"}`);

const BODY_HEAD = Buffer.from('{"entries":[');

/**
 * `{"entryId":"<id>","event":` (after a comma unless first) as bytes, kept for the positional ids
 * BulkSender gives ("0"…"99"): no bytes made per entry.
 */
const ENTRY_HEADS = [new Map<string, Buffer>(), new Map<string, Buffer>()];
function entryHead(first: boolean, entryId: string): Buffer {
  const cache = ENTRY_HEADS[first ? 0 : 1];
  let b = cache.get(entryId);
  if (!b) {
    b = Buffer.from(`${first ? '' : ','}{"entryId":${JSON.stringify(entryId)},"event":`);
    if (cache.size < 10_000) cache.set(entryId, b);
  }
  return b;
}

/** Bulk delivery over HTTP: the batch is POSTed to the path as JSON, the app answers per entry. */
export function httpBatchPoster(app: AppChannel, info: SubscriptionInfo, log: Logger): BatchPoster {
  return async (path, entries) => {
    // written as bytes: each CloudEvent goes in as the bytes it arrived in, neither decoded nor stringified again
    const parts: Buffer[] = [BODY_HEAD];
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      const raw = rawPayloadOf(e.event);
      if (raw) {
        parts.push(entryHead(i === 0, e.entryId), Buffer.from(`"${raw.data.toString('base64')}"`), RAW_ENTRY_TAIL);
        continue;
      }
      const json = eventJson(e.event);
      parts.push(entryHead(i === 0, e.entryId), typeof json === 'string' ? Buffer.from(json) : json, ENTRY_TAIL);
    }
    const tail = JSON.stringify({ id: randomUUID(), metadata: info.metadata, pubsubname: info.pubsubname, topic: info.topic, type: BULK_EVENT_TYPE });
    parts.push(Buffer.from(`],${tail.slice(1)}`));
    const body = Buffer.concat(parts);
    try {
      const res = await app.invoke({ method: 'POST', path, body, headers: { 'content-type': 'application/json', pubsubname: info.pubsubname } });
      if (res.status >= 200 && res.status < 300) return statusesOf(res.body);
      if (res.status !== 404) return 'RETRY';
      log.warn({ path, entries: entries.length }, 'the app answered 404 to a bulk delivery: its messages are acknowledged unhandled');
      return 'SUCCESS';
    } catch (e) {
      log.warn({ path, entries: entries.length }, `bulk delivery: ${(e as Error).message}`);
      return 'RETRY';
    }
  };
}

function statusesOf(body: Buffer): Map<string, Outcome> {
  const out = new Map<string, Outcome>();
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { statuses?: unknown };
    if (!Array.isArray(parsed.statuses)) return out;
    for (const s of parsed.statuses) {
      if (typeof s !== 'object' || s === null) continue;
      const { entryId, status } = s as { entryId?: unknown; status?: unknown };
      if (typeof entryId !== 'string') continue;
      const word = status === 'SUCCESS' ? status : String(status ?? '').toUpperCase();
      out.set(entryId, word === 'SUCCESS' ? 'SUCCESS' : word === 'DROP' ? 'DROP' : 'RETRY');
    }
  } catch {
    // not JSON: every entry is RETRY
  }
  return out;
}
