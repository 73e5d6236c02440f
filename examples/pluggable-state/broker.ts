/**
 * The example's pub/sub: topics in memory. Every PullMessages stream of a topic gets each message
 * published after it opened; a message the stream acknowledges with an error is sent again
 * after a second (rt gives a message back when the app did not take it).
 */
import { randomUUID } from 'node:crypto';

export interface BrokerMessage {
  id: string;
  topicName: string;
  data: Buffer;
  contentType: string;
  metadata: Record<string, string>;
}

export interface Puller {
  send(m: BrokerMessage): void;
}

export class Broker {
  private readonly topics = new Map<string, Set<Puller>>();
  /** messages sent and not yet acknowledged, by id, with who has them. */
  private readonly unacked = new Map<string, { m: BrokerMessage; to: Puller }>();

  publish(topicName: string, data: Buffer, contentType: string, metadata: Record<string, string>): void {
    for (const p of this.topics.get(topicName) ?? []) this.send(p, { id: randomUUID(), topicName, data, contentType, metadata });
  }

  pull(topic: string, p: Puller): () => void {
    let set = this.topics.get(topic);
    if (!set) this.topics.set(topic, (set = new Set()));
    set.add(p);
    return () => {
      set.delete(p);
      for (const [id, u] of this.unacked) if (u.to === p) this.unacked.delete(id);
    };
  }

  ack(id: string, error: string | undefined): void {
    const u = this.unacked.get(id);
    if (!u) return;
    this.unacked.delete(id);
    if (error) setTimeout(() => this.topics.get(u.m.topicName)?.has(u.to) && this.send(u.to, u.m), 1000).unref();
  }

  private send(p: Puller, m: BrokerMessage): void {
    this.unacked.set(m.id, { m, to: p });
    p.send(m);
  }
}
