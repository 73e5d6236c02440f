/**
 * Placement without a placement service (standalone `rt run`, or no placement address): every
 * type this sidecar hosts is served here, and a type it does not host has no known host.
 */
import type { ActorHost, ActorPlacement } from './types.ts';

export class LocalPlacement implements ActorPlacement {
  private hosted = new Set<string>();
  private readonly self: ActorHost;
  private readonly listeners = new Set<() => void>();
  readonly locked = false;

  /** `address`: this sidecar's internal invocation address, when it has one. */
  constructor(appId: string, address = '') {
    this.self = { appId, address, local: true };
  }

  setHostedTypes(types: string[]): void {
    this.hosted = new Set(types);
    for (const l of this.listeners) l();
  }

  lookup(actorType: string, _actorId: string): ActorHost | undefined {
    return this.hosted.has(actorType) ? this.self : undefined;
  }

  async ready(): Promise<void> {}

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
