/**
 * Exponential backoff, the one implementation every reconnect and redelivery loop of rt uses
 * (scheduler streams, the operator stream, informers, pluggable components, pub/sub
 * redelivery): the n-th wait is `initialMs × multiplier^n`, never more than `maxMs`, optionally
 * jittered, and back to `initialMs` after a success. `wait` sleeps on a Clock, so the loops run
 * on fake time in tests, and ends early when its AbortSignal fires.
 */
import { SYSTEM_CLOCK, type Clock } from './clock.ts';

/**
 * - `none`: the delay as computed.
 * - `full`: uniform in [0, delay] (AWS's "full jitter").
 * - `equal`: delay/2 plus uniform in [0, delay/2].
 * - a number f in (0, 1]: uniform in [delay × (1 − f), delay × (1 + f)], held to maxMs.
 */
export type Jitter = 'none' | 'full' | 'equal' | number;

export interface BackoffPolicy {
  /** The first wait (> 0). */
  initialMs: number;
  /** No wait is longer. */
  maxMs: number;
  /** Growth per attempt (≥ 1); default 2. */
  multiplier?: number;
  /** Default `none`. */
  jitter?: Jitter;
}

/** The wait before retry number `attempt` (0 for the first), without jitter: `min(maxMs, initialMs × multiplier^attempt)`. */
export function backoffDelay(policy: BackoffPolicy, attempt: number): number {
  const d = policy.initialMs * (policy.multiplier ?? 2) ** Math.max(0, attempt);
  return Math.min(policy.maxMs, d);
}

/** `delay` spread by the policy's jitter; `random` returns a number in [0, 1). Never above maxMs. */
export function jittered(policy: BackoffPolicy, delay: number, random: () => number = Math.random): number {
  const j = policy.jitter ?? 'none';
  if (j === 'none') return delay;
  if (j === 'full') return delay * random();
  if (j === 'equal') return delay / 2 + (delay / 2) * random();
  return Math.min(policy.maxMs, delay * (1 - j + 2 * j * random()));
}

function check(policy: BackoffPolicy): void {
  const { initialMs, maxMs, multiplier = 2, jitter = 'none' } = policy;
  if (!(initialMs > 0) || !(maxMs >= initialMs) || !(multiplier >= 1)) {
    throw new RangeError(`backoff: need 0 < initialMs (${initialMs}) <= maxMs (${maxMs}) and multiplier (${multiplier}) >= 1`);
  }
  if (typeof jitter === 'number' && !(jitter > 0 && jitter <= 1)) throw new RangeError(`backoff: a jitter fraction is in (0, 1], not ${jitter}`);
}

/** The waits of one retry loop: `next()` after each failure, `reset()` after a success. */
export class Backoff {
  readonly policy: BackoffPolicy;
  private readonly random: () => number;
  private n = 0;

  constructor(policy: BackoffPolicy, random: () => number = Math.random) {
    check(policy);
    this.policy = policy;
    this.random = random;
  }

  /** Failures since the last reset. */
  get attempts(): number {
    return this.n;
  }

  /** The wait before the next attempt; each call counts one failure. */
  next(): number {
    return jittered(this.policy, backoffDelay(this.policy, this.n++), this.random);
  }

  /** After a success: the next wait is initialMs again. */
  reset(): void {
    this.n = 0;
  }
}

export interface WaitOptions {
  clock?: Clock;
  signal?: AbortSignal;
}

/** Resolves true after `ms` on the clock, or false as soon as `signal` aborts (at once if it already has). */
export function wait(ms: number, opts: WaitOptions = {}): Promise<boolean> {
  const { clock = SYSTEM_CLOCK, signal } = opts;
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      timer.cancel();
      resolve(false);
    };
    const timer = clock.after(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
