/**
 * Replicas of one app sharing a workflow store see each other through one registry key:
 * `{replicaId: lastSeenMs}`, refreshed by every replica every HEARTBEAT_MS. A replica unseen
 * for DEAD_AFTER_MS is dead: the first live replica to remove it from the registry (an etag
 * write, so exactly one wins) adopts its instances — pending activities, timers and runs.
 * A replica that stops gracefully marks itself dead at once, so its instances move on
 * without waiting.
 */
import type { Logger } from 'pino';
import type { StateStore } from '../components/types.ts';
import { SYSTEM_CLOCK, type Clock, type Timer } from '../../../shared/clock.ts';
import { isConflict } from './etag-retry.ts';

export const HEARTBEAT_MS = 2000;
export const DEAD_AFTER_MS = 10_000;

export class ReplicaRegistry {
  private readonly store: StateStore;
  private readonly key: string;
  private readonly me: string;
  private readonly log: Logger;
  private readonly adopt: (deadId: string) => Promise<void>;
  private readonly clock: Clock;
  private timer?: Timer;
  private beating?: Promise<void>;

  constructor(store: StateStore, key: string, me: string, log: Logger, adopt: (deadId: string) => Promise<void>, clock: Clock = SYSTEM_CLOCK) {
    this.store = store;
    this.key = key;
    this.me = me;
    this.log = log;
    this.adopt = adopt;
    this.clock = clock;
  }

  async start(): Promise<void> {
    await this.beat();
    this.timer = this.clock.every(HEARTBEAT_MS, () => {
      if (!this.beating) {
        this.beating = this.beat().then(
          () => undefined,
          () => undefined,
        );
        void this.beating.finally(() => (this.beating = undefined));
      }
    });
  }

  /** One heartbeat: refresh our entry, remove (and adopt) replicas that stopped beating. */
  async beat(now = this.clock.now()): Promise<string[]> {
    try {
      const item = await this.store.get(this.key);
      const seen = parse(item?.value);
      seen[this.me] = now;
      const dead = Object.keys(seen).filter((id) => id !== this.me && now - seen[id] > DEAD_AFTER_MS);
      for (const id of dead) delete seen[id];
      const value = Buffer.from(JSON.stringify(seen));
      await this.store.set(item ? { key: this.key, value, etag: item.etag } : { key: this.key, value, options: { concurrency: 'first-write' } });
      for (const id of dead) {
        this.log.warn({ replica: id }, 'workflow replica stopped answering; adopting its instances');
        await this.adopt(id).catch((e) => this.log.error({ err: e, replica: id }, 'adopting the instances of a dead replica failed'));
      }
      return dead;
    } catch (e) {
      // an etag conflict means another replica wrote at the same moment: the next beat retries
      if (!isConflict(e)) this.log.warn({ err: e }, 'workflow replica heartbeat failed');
      return [];
    }
  }

  /** Graceful stop: mark ourselves dead so that the others adopt our instances now. */
  async leave(): Promise<void> {
    this.timer?.cancel();
    await this.beating;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const item = await this.store.get(this.key);
        if (!item) return;
        const seen = parse(item.value);
        seen[this.me] = 0;
        await this.store.set({ key: this.key, value: Buffer.from(JSON.stringify(seen)), etag: item.etag });
        return;
      } catch (e) {
        if (!isConflict(e)) return;
      }
    }
  }
}

function parse(v: Uint8Array | undefined): Record<string, number> {
  if (!v) return {};
  try {
    const o = JSON.parse(Buffer.from(v).toString('utf8')) as unknown;
    if (!o || typeof o !== 'object' || Array.isArray(o)) return {};
    const out: Record<string, number> = {};
    for (const [k, t] of Object.entries(o)) if (typeof t === 'number') out[k] = t;
    return out;
  } catch {
    return {};
  }
}
