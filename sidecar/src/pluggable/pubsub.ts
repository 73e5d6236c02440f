/**
 * A pluggable pub/sub component over dapr.proto.components.v1.PubSub: the adapter initialises
 * the component (Init, Features, health) and offers publish and subscribe in the shape of
 * components/pubsub/types.ts, so the pub/sub building block (pubsub/) uses it like a built-in.
 */
import type * as grpc from '@grpc/grpc-js';
import { SERVICES } from './apis.ts';
import { PluggableComponent } from './component.ts';

export interface PubSubMessage {
  topic: string;
  data: Uint8Array;
  metadata: Record<string, string>;
  contentType?: string;
}

export interface PublishEntry {
  entryId: string;
  event: Uint8Array;
  contentType?: string;
  metadata?: Record<string, string>;
}

export interface Subscription {
  close(): void;
}

interface PullMessagesResponse {
  data: Buffer;
  topicName: string;
  metadata: Record<string, string>;
  contentType: string;
  id: string;
}
interface PullMessagesRequest {
  topic?: { name: string; metadata: Record<string, string> };
  ackMessageId?: string;
  ackError?: { message: string } | null;
}

export class PluggablePubSub extends PluggableComponent {
  protected readonly api = 'pubsub';
  private featureList: string[] = [];
  private readonly streams = new Set<grpc.ClientDuplexStream<PullMessagesRequest, PullMessagesResponse>>();

  protected async initialize(): Promise<void> {
    this.featureList = await this.initAndFeatures(SERVICES.PubSub);
  }

  protected pingService(): string {
    return SERVICES.PubSub;
  }

  /** The contract shows capabilities for state stores and bindings only. */
  capabilities(): string[] {
    return [];
  }

  /** What the component's Features call reported. */
  features(): string[] {
    return [...this.featureList];
  }

  async publish(topic: string, data: Uint8Array, metadata: Record<string, string> = {}, contentType = ''): Promise<void> {
    await this.call(SERVICES.PubSub, 'Publish', { data: Buffer.from(data), pubsubName: this.spec.name, topic, metadata, contentType });
  }

  /** Returns the entries the component could not publish, with its error. */
  async bulkPublish(topic: string, entries: PublishEntry[], metadata: Record<string, string> = {}): Promise<{ entryId: string; error: string }[]> {
    const res = await this.call<{ failedEntries: { entryId: string; error: string }[] }>(SERVICES.PubSub, 'BulkPublish', {
      entries: entries.map((e) => ({ entryId: e.entryId, event: Buffer.from(e.event), contentType: e.contentType ?? '', metadata: e.metadata ?? {} })),
      pubsubName: this.spec.name,
      topic,
      metadata,
    });
    return res.failedEntries;
  }

  /**
   * Pulls the topic's messages; each goes to `handler`, whose success or error is the ack.
   * The stream lives until close() (or the component closes it).
   */
  subscribe(topic: string, metadata: Record<string, string>, handler: (m: PubSubMessage) => Promise<void>): Subscription {
    const stream = this.conn.duplex<PullMessagesRequest, PullMessagesResponse>(SERVICES.PubSub, 'PullMessages');
    this.streams.add(stream);
    stream.write({ topic: { name: topic, metadata } });
    stream.on('data', (m: PullMessagesResponse) => {
      handler({ topic: m.topicName || topic, data: m.data, metadata: m.metadata, contentType: m.contentType || undefined }).then(
        () => stream.writable && stream.write({ ackMessageId: m.id }),
        (e: Error) => stream.writable && stream.write({ ackMessageId: m.id, ackError: { message: e.message } }),
      );
    });
    const done = (err?: Error) => {
      this.streams.delete(stream);
      if (err && !/cancel/i.test(err.message)) this.host.log.warn({ component: this.spec.name, topic }, `pub/sub pull stream ended: ${err.message}`);
    };
    stream.on('error', done);
    stream.on('end', () => done());
    return {
      close: () => {
        this.streams.delete(stream);
        stream.cancel();
      },
    };
  }

  override async close(): Promise<void> {
    for (const s of this.streams) s.cancel();
    this.streams.clear();
    await super.close();
  }
}
