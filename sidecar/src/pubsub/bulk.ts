/**
 * bulkSubscribe: messages for one path are gathered into batches (up to maxMessagesCount, or
 * what arrived within maxAwaitDurationMs) and POSTed to the app at once:
 *   {id, entries: [{entryId, event, contentType, metadata}], metadata, pubsubname, topic, type}
 * The app answers {"statuses": [{entryId, status}]}: each entry gets its own SUCCESS, RETRY or
 * DROP (an entry it does not name is RETRY). A non-2xx answer counts for every entry (404: DROP,
 * anything else RETRY). Each message then goes through the usual retries and dead letter, so a
 * retried entry simply joins a later batch.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import type { BulkSubscribe, SubscriptionInfo } from '../resources/types.ts';
import type { CloudEvent } from './cloudevent.ts';
import { CLOUDEVENT_CONTENT_TYPE } from './cloudevent.ts';
import { outcomeOf, type Outcome } from './delivery.ts';
import type { MessageTarget } from './subscriptions.ts';

export const BULK_EVENT_TYPE = 'rt.event.sent.bulk';

interface Waiting {
  entryId: string;
  event: CloudEvent;
  resolve: (o: Outcome) => void;
}

export class BulkSender implements MessageTarget {
  private readonly batches = new Map<string, { entries: Waiting[]; timer: NodeJS.Timeout }>();
  private readonly max: number;
  private readonly waitMs: number;
  private readonly app: AppChannel;
  private readonly info: SubscriptionInfo;
  private readonly log: Logger;

  constructor(app: AppChannel, info: SubscriptionInfo, bulk: BulkSubscribe, log: Logger) {
    this.app = app;
    this.info = info;
    this.max = bulk.maxMessagesCount ?? 100;
    this.waitMs = bulk.maxAwaitDurationMs ?? 1000;
    this.log = log;
  }

  send(path: string, event: CloudEvent): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      let b = this.batches.get(path);
      if (!b) {
        b = { entries: [], timer: setTimeout(() => void this.flush(path), this.waitMs) };
        this.batches.set(path, b);
      }
      b.entries.push({ entryId: randomUUID(), event, resolve });
      if (b.entries.length >= this.max) void this.flush(path);
    });
  }

  private async flush(path: string): Promise<void> {
    const b = this.batches.get(path);
    if (!b) return;
    this.batches.delete(path);
    clearTimeout(b.timer);
    const body = {
      id: randomUUID(),
      entries: b.entries.map((e) => ({ entryId: e.entryId, event: e.event, contentType: CLOUDEVENT_CONTENT_TYPE, metadata: {} })),
      metadata: this.info.metadata,
      pubsubname: this.info.pubsubname,
      topic: this.info.topic,
      type: BULK_EVENT_TYPE,
    };
    let outcomes: Map<string, Outcome> | Outcome;
    try {
      const res = await this.app.invoke({ method: 'POST', path, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      outcomes = res.status >= 200 && res.status < 300 ? statusesOf(res.body) : outcomeOf(res.status, res.body);
    } catch (e) {
      this.log.warn({ path, entries: b.entries.length }, `bulk delivery: ${(e as Error).message}`);
      outcomes = 'RETRY';
    }
    for (const e of b.entries) e.resolve(typeof outcomes === 'string' ? outcomes : (outcomes.get(e.entryId) ?? 'RETRY'));
  }

  /** Sends what is gathered now (the subscription closes). */
  close(): void {
    for (const path of [...this.batches.keys()]) void this.flush(path);
  }
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
      const word = String(status ?? '').toUpperCase();
      out.set(entryId, word === 'SUCCESS' ? 'SUCCESS' : word === 'DROP' ? 'DROP' : 'RETRY');
    }
  } catch {
    // not JSON: every entry is RETRY
  }
  return out;
}
