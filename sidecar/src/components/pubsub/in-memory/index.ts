/**
 * pubsub.in-memory: topics inside this sidecar. Every subscription of a topic gets each message
 * published after it subscribed. A message whose handler fails is delivered again with a
 * growing delay (1 s doubling to 30 s) until it is acknowledged or the component closes.
 * Nothing survives a restart.
 */
import type { ComponentFactory } from '../../types.ts';
import type { MessageHandler, PubSub, PubSubMessage, TopicSubscription } from '../types.ts';
import { backoffDelay } from '../../../../../shared/backoff.ts';

const REDELIVERY = { initialMs: 1000, maxMs: 30_000 };

class InMemoryPubSub implements PubSub {
  private readonly topics = new Map<string, Set<MessageHandler>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  async init(): Promise<void> {}

  capabilities(): string[] {
    return [];
  }

  features(): string[] {
    return [];
  }

  async publish(topic: string, data: Uint8Array, metadata: Record<string, string> = {}, contentType?: string): Promise<void> {
    if (this.closed) throw new Error('pubsub.in-memory is closed');
    const message: PubSubMessage = { topic, data, metadata, contentType };
    for (const h of this.topics.get(topic) ?? []) this.deliver(h, message, 0, 0);
  }

  subscribe(topic: string, _metadata: Record<string, string>, handler: MessageHandler): TopicSubscription {
    let set = this.topics.get(topic);
    if (!set) this.topics.set(topic, (set = new Set()));
    // a wrapper per subscription, so the same handler subscribed twice counts twice
    const own: MessageHandler = (m) => handler(m);
    set.add(own);
    return { close: () => set.delete(own) };
  }

  /** `failures`: deliveries of `m` to `h` that failed so far; the next one waits by REDELIVERY. */
  private deliver(h: MessageHandler, m: PubSubMessage, failures: number, delay: number): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (this.closed || !this.topics.get(m.topic)?.has(h)) return;
      h(m).catch(() => this.deliver(h, m, failures + 1, backoffDelay(REDELIVERY, failures)));
    }, delay);
    this.timers.add(t);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.topics.clear();
  }
}

export const factory: ComponentFactory = () => new InMemoryPubSub();
