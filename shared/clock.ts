/**
 * Time as a dependency: where a component reads the time and schedules its callbacks. The
 * system clock in production; a ManualClock in tests, which moves only when the test moves it,
 * so timers, retries and backoff are tested on fake time instead of by waiting.
 */

export interface Timer {
  cancel(): void;
}

export interface Clock {
  now(): number;
  /** Calls fn once, after ms (any length: longer than setTimeout's limit too). */
  after(ms: number, fn: () => void): Timer;
  /** Calls fn every ms until cancelled. */
  every(ms: number, fn: () => void): Timer;
}

/** Longest delay setTimeout accepts; longer ones are waited for in steps. */
const MAX_DELAY = 2_147_000_000;

export interface SystemClockOptions {
  /** Timers keep the process alive (default: they do not, as with unref()). */
  keepAlive?: boolean;
}

/** Date.now and the event loop's timers. */
export function systemClock(opts: SystemClockOptions = {}): Clock {
  const hold = <T extends NodeJS.Timeout>(h: T): T => (opts.keepAlive ? h : h.unref());
  return {
    now: () => Date.now(),
    after(ms, fn) {
      let h: NodeJS.Timeout;
      const at = Date.now() + ms;
      const arm = (left: number) => {
        h = hold(setTimeout(() => (left > MAX_DELAY ? arm(at - Date.now()) : fn()), Math.max(0, Math.min(left, MAX_DELAY))));
      };
      arm(ms);
      return { cancel: () => clearTimeout(h) };
    },
    every(ms, fn) {
      const h = hold(setInterval(fn, ms));
      return { cancel: () => clearInterval(h) };
    },
  };
}

/** The clock of a process that does not need its timers to hold it open. */
export const SYSTEM_CLOCK: Clock = systemClock();

interface Due {
  at: number;
  seq: number;
  fn: () => void;
  every?: number;
}

/**
 * A clock that stands still until `advance` moves it. Timers fall due in time order (those due
 * at the same time in the order they were set), and the promises each one starts get to run
 * before the next fires, so a chain of timers and awaits plays out as it would in real time.
 */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly due = new Map<number, Due>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): Timer {
    return this.add({ at: this.t + Math.max(0, ms), seq: 0, fn });
  }

  every(ms: number, fn: () => void): Timer {
    const step = Math.max(1, ms);
    return this.add({ at: this.t + step, seq: 0, fn, every: step });
  }

  /** Timers not yet fired (or cancelled). */
  get pending(): number {
    return this.due.size;
  }

  /** When the next timer falls due, or undefined when none is set. */
  get next(): number | undefined {
    let at: number | undefined;
    for (const d of this.due.values()) if (at === undefined || d.at < at) at = d.at;
    return at;
  }

  /** Moves time forward by ms, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const end = this.t + Math.max(0, ms);
    for (;;) {
      let first: Due | undefined;
      for (const d of this.due.values()) if (d.at <= end && (!first || d.at < first.at || (d.at === first.at && d.seq < first.seq))) first = d;
      if (!first) break;
      this.t = first.at;
      if (first.every) {
        this.due.delete(first.seq);
        first.at += first.every;
        first.seq = ++this.seq;
        this.due.set(first.seq, first);
      } else this.due.delete(first.seq);
      first.fn();
      await turns(3);
    }
    this.t = end;
    await turns(3);
  }

  private add(d: Due): Timer {
    d.seq = ++this.seq;
    this.due.set(d.seq, d);
    const entry = d;
    return { cancel: () => void this.due.delete(entry.seq) };
  }
}

/** Lets promises and I/O callbacks scheduled so far run (a few turns of the event loop). */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
}
