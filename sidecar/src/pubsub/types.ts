/**
 * The shapes pub/sub delivery passes between its parts: what the app answered, how often a
 * message is tried again, and the targets that reach the app (HTTP: delivery.ts, bulk.ts; gRPC:
 * grpc-app.ts), used by the subscriptions (subscriptions.ts). A module of types only, so that
 * those parts import it and not each other.
 */
import type { BulkSubscribe, SubscriptionInfo } from '../resources/types.ts';
import type { BackoffPolicy } from '../../../shared/backoff.ts';
import type { CloudEvent } from './cloudevent.ts';

export type Outcome = 'SUCCESS' | 'RETRY' | 'DROP';

/** Retries of a message the app answered RETRY: their waits, and how many. */
export interface RetryPolicy extends BackoffPolicy {
  /** retries after the first attempt. */
  maxRetries: number;
}

export interface MessageTarget {
  /**
   * Sends the event to `path` once; the outcome decides about retries. `sub`: the subscription
   * it is delivered for (its topic and pub/sub are the ones the app is told, whatever the event's
   * own attributes say).
   */
  send(path: string, event: CloudEvent, sub: SubscriptionInfo, signal?: AbortSignal): Promise<Outcome>;
}

/** How the app is reached: over HTTP (delivery.ts, bulk.ts) or gRPC AppCallback (grpc-app.ts). */
export interface AppTargets {
  /** One message per call. */
  single: MessageTarget;
  /** Batches for a bulkSubscribe subscription; closed with the subscription. */
  bulk(info: SubscriptionInfo, bulk: BulkSubscribe): MessageTarget & { close(): void };
}
