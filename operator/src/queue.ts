import { Backoff } from '../../shared/backoff.ts';

/** A key's waits after failed work: 100 ms doubling to 30 s. */
const RETRY_BACKOFF = { initialMs: 100, maxMs: 30_000 };

/**
 * A work queue of keys (namespace/name): a key added several times before it is worked on is
 * worked on once (level-triggered), a key is never worked on twice at the same time, and a key
 * whose work failed comes back after a per-key backoff.
 */
export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly active = new Set<string>();
  private readonly again = new Set<string>();
  private readonly failures = new Map<string, Backoff>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly work: (key: string) => Promise<void>;
  private readonly concurrency: number;
  private running = 0;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];

  constructor(work: (key: string) => Promise<void>, concurrency = 8) {
    this.work = work;
    this.concurrency = concurrency;
  }

  add(key: string): void {
    if (this.stopped) return;
    if (this.active.has(key)) {
      this.again.add(key);
      return;
    }
    this.pending.add(key);
    this.pump();
  }

  /** Resolves when nothing is queued, running or waiting for a retry. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.pending.clear();
  }

  private isIdle(): boolean {
    return this.pending.size === 0 && this.running === 0 && this.timers.size === 0;
  }

  private pump(): void {
    while (!this.stopped && this.running < this.concurrency && this.pending.size > 0) {
      const key = this.pending.values().next().value as string;
      this.pending.delete(key);
      this.active.add(key);
      this.running++;
      void this.work(key).then(
        () => this.finish(key, true),
        () => this.finish(key, false),
      );
    }
    if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
  }

  private finish(key: string, ok: boolean): void {
    this.active.delete(key);
    this.running--;
    if (ok) {
      this.failures.delete(key);
    } else if (!this.stopped) {
      let backoff = this.failures.get(key);
      if (!backoff) this.failures.set(key, (backoff = new Backoff(RETRY_BACKOFF)));
      const delay = backoff.next();
      this.timers.set(
        key,
        setTimeout(() => {
          this.timers.delete(key);
          this.add(key);
        }, delay),
      );
    }
    if (this.again.delete(key)) this.pending.add(key);
    this.pump();
  }
}
