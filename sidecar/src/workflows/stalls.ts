/**
 * Stalled instances of this replica (a run no connected worker could apply: reducer.ts's
 * `stalled`) and when each is run again: as soon as a worker connects, and every
 * STALL_RETRY_MS in case the worker that can run it was already connected.
 */
import type { Clock, Timer } from '../../../shared/clock.ts';

export const STALL_RETRY_MS = 30_000;

export class StallRetries {
  private readonly clock: Clock;
  private readonly retry: (id: string) => void;
  private readonly waiting = new Map<string, Timer>();
  private closed = false;

  /** `retry` runs the instance again. */
  constructor(clock: Clock, retry: (id: string) => void) {
    this.clock = clock;
    this.retry = retry;
  }

  /** The instance stalled: it is tried again later (once, however often it stalls meanwhile). */
  later(id: string): void {
    if (this.closed || this.waiting.has(id)) return;
    this.waiting.set(id, this.clock.after(STALL_RETRY_MS, () => this.now(id)));
  }

  /** A worker connected: every stalled instance is tried now. */
  all(): void {
    for (const id of [...this.waiting.keys()]) this.now(id);
  }

  close(): void {
    this.closed = true;
    for (const t of this.waiting.values()) t.cancel();
    this.waiting.clear();
  }

  private now(id: string): void {
    this.waiting.get(id)?.cancel();
    this.waiting.delete(id);
    if (!this.closed) this.retry(id);
  }
}
