/**
 * What a pub/sub component offers the pub/sub building block. Built-in components and the
 * pluggable adapter (pluggable/pubsub.ts) have the same shape, so the block never knows which
 * kind it talks to.
 */
import type { Component } from '../types.ts';

export interface PubSubMessage {
  topic: string;
  data: Uint8Array;
  metadata: Record<string, string>;
  contentType?: string;
}

export interface BulkPublishEntry {
  entryId: string;
  event: Uint8Array;
  contentType?: string;
  metadata?: Record<string, string>;
}

export interface TopicSubscription {
  close(): void;
}

/**
 * A handler that resolves acknowledges the message; one that rejects leaves it to the component
 * to deliver again later (at-least-once).
 */
export type MessageHandler = (m: PubSubMessage) => Promise<void>;

export interface PubSub extends Component {
  features(): string[];
  publish(topic: string, data: Uint8Array, metadata?: Record<string, string>, contentType?: string): Promise<void>;
  /** Returns the entries that could not be published, with the reason. */
  bulkPublish?(topic: string, entries: BulkPublishEntry[], metadata?: Record<string, string>): Promise<{ entryId: string; error: string }[]>;
  subscribe(topic: string, metadata: Record<string, string>, handler: MessageHandler): TopicSubscription;
}

export function isPubSub(c: Component | undefined): c is PubSub {
  const p = c as Partial<PubSub> | undefined;
  return typeof p?.publish === 'function' && typeof p.subscribe === 'function';
}
