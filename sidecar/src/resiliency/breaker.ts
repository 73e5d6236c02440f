/**
 * A circuit breaker with the reference runtime's semantics (it uses sony/gobreaker):
 * - **closed**: calls pass and are counted; when `trip(counts)` holds after a failure, it opens.
 *   With `intervalMs` > 0 the counts start again every interval.
 * - **open**: calls fail at once (CircuitOpenError, naming the policy) until `timeoutMs` passes.
 * - **half-open**: up to `maxRequests` calls pass; that many successes in a row close it, one
 *   failure opens it again. Calls beyond `maxRequests` fail at once (too many requests).
 * Time comes from a Clock, so the transitions are tested on fake time.
 */
import type { Clock } from '../../../shared/clock.ts';
import type { Counts, TripCondition } from './trip.ts';

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerSettings {
  /** The policy's name, in errors and metrics. */
  name: string;
  maxRequests: number;
  /** Closed: how often the counts start again (0: never). */
  intervalMs: number;
  /** Open: how long before a trial call is let through. */
  timeoutMs: number;
  trip: TripCondition;
}

/** A call refused without being made: the circuit is open, or half-open with its trial calls out. */
export class CircuitOpenError extends Error {
  readonly policy: string;
  readonly state: BreakerState;
  constructor(policy: string, state: BreakerState) {
    super(state === 'open' ? `circuit breaker "${policy}" is open` : `circuit breaker "${policy}" is half-open and its trial requests are in flight`);
    this.policy = policy;
    this.state = state;
  }
}

const zero = (): Counts => ({ requests: 0, totalSuccesses: 0, totalFailures: 0, consecutiveSuccesses: 0, consecutiveFailures: 0 });

export class CircuitBreaker {
  readonly settings: BreakerSettings;
  private readonly clock: Clock;
  private st: BreakerState = 'closed';
  private counts = zero();
  /** Closed: when the counts start again; open: when it turns half-open (0: never). */
  private until = 0;
  /** Bumped at every state change or count reset: a call's outcome counts only in its own generation. */
  private generation = 0;
  /** Called on every change of state (metrics, logs). */
  onChange?: (from: BreakerState, to: BreakerState) => void;

  constructor(settings: BreakerSettings, clock: Clock) {
    this.settings = settings;
    this.clock = clock;
    this.toNewGeneration(clock.now());
  }

  /** The state now (an open breaker whose timeout has passed reads half-open). */
  get state(): BreakerState {
    this.refresh(this.clock.now());
    return this.st;
  }

  /** A copy of the counts of the current generation. */
  get current(): Counts {
    this.refresh(this.clock.now());
    return { ...this.counts };
  }

  /**
   * Lets a call through or throws CircuitOpenError. The returned function must be called once
   * with the call's outcome.
   */
  admit(): (ok: boolean) => void {
    const now = this.clock.now();
    this.refresh(now);
    if (this.st === 'open') throw new CircuitOpenError(this.settings.name, 'open');
    if (this.st === 'half-open' && this.counts.requests >= this.settings.maxRequests) throw new CircuitOpenError(this.settings.name, 'half-open');
    this.counts.requests++;
    const generation = this.generation;
    let done = false;
    return (ok) => {
      if (done) return;
      done = true;
      const at = this.clock.now();
      this.refresh(at);
      if (generation !== this.generation) return;
      if (ok) this.success(at);
      else this.failure(at);
    };
  }

  /** Runs `call` through the breaker: refused at once when open; its outcome counted otherwise. */
  async run<T>(call: () => Promise<T>, failed: (e: unknown) => boolean = () => true): Promise<T> {
    const report = this.admit();
    try {
      const v = await call();
      report(true);
      return v;
    } catch (e) {
      report(!failed(e));
      throw e;
    }
  }

  private success(now: number): void {
    const c = this.counts;
    c.totalSuccesses++;
    c.consecutiveSuccesses++;
    c.consecutiveFailures = 0;
    if (this.st === 'half-open' && c.consecutiveSuccesses >= this.settings.maxRequests) this.set('closed', now);
  }

  private failure(now: number): void {
    const c = this.counts;
    c.totalFailures++;
    c.consecutiveFailures++;
    c.consecutiveSuccesses = 0;
    if (this.st === 'half-open' || (this.st === 'closed' && this.settings.trip(c))) this.set('open', now);
  }

  private refresh(now: number): void {
    if (this.st === 'closed' && this.until > 0 && now >= this.until) this.toNewGeneration(now);
    else if (this.st === 'open' && now >= this.until) this.set('half-open', now);
  }

  private set(to: BreakerState, now: number): void {
    const from = this.st;
    if (from === to) return;
    this.st = to;
    this.toNewGeneration(now);
    this.onChange?.(from, to);
  }

  private toNewGeneration(now: number): void {
    this.generation++;
    this.counts = zero();
    if (this.st === 'closed') this.until = this.settings.intervalMs > 0 ? now + this.settings.intervalMs : 0;
    else if (this.st === 'open') this.until = now + this.settings.timeoutMs;
    else this.until = 0;
  }
}
