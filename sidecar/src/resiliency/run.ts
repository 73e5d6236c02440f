/**
 * One operation under a resolved policy: each try runs through the circuit breaker (an open
 * circuit refuses at once, and that refusal is not retried) with its own timeout (the try's
 * AbortSignal fires, so the call underneath is cancelled, and the wait ends even if it is not);
 * a failed try is retried as the retry policy says, on the policy's clock.
 */
import { Backoff, wait } from '../../../shared/backoff.ts';
import { SYSTEM_CLOCK, type Clock } from '../../../shared/clock.ts';
import type { CircuitBreaker } from './breaker.ts';
import { inCodeSet, type RetrySettings } from './spec.ts';

/** The policies in force for one target (an app, a component in one direction). */
export interface ResolvedPolicy {
  /** What it applies to, e.g. `app:orders` or `component:statestore/outbound`: in metrics and errors. */
  target: string;
  timeout?: { name: string; ms: number };
  retry?: RetrySettings;
  breaker?: CircuitBreaker;
}

/** The codes a failure carries, for `matching`. */
export interface FailureCodes {
  http?: number;
  grpc?: number;
}

export class PolicyTimeoutError extends Error {
  readonly policy: string;
  constructor(policy: string, ms: number, target: string) {
    super(`timeout policy "${policy}" (${ms} ms) ran out calling ${target}`);
    this.policy = policy;
  }
}

export type Outcome = 'success' | 'failure' | 'retry' | 'timeout' | 'circuit-open';

export interface RunOptions<T> {
  clock?: Clock;
  /** The caller's own cancellation: no more tries once it fires. */
  signal?: AbortSignal;
  /** A result that is a failure (an HTTP 503 answer, say), with its codes; undefined: a success. */
  failureOf?: (result: T) => FailureCodes | undefined;
  /** The codes of a thrown error (undefined when it has none: a refused connection). */
  codesOf?: (error: unknown) => FailureCodes | undefined;
  /**
   * A thrown error that is the request's fault, not the target's (an etag mismatch, a bad key):
   * given back at once, not retried, and not counted against the circuit breaker.
   */
  isRequestError?: (error: unknown) => boolean;
  /** Given each failed result that is retried, to free it (an answer's body stream). */
  discard?: (result: T) => void;
  /** Told of every try's outcome (metrics). */
  observe?: (outcome: Outcome) => void;
  random?: () => number;
}

/** Whether a failure with these codes is one the retry policy retries. */
export function retries(policy: RetrySettings, codes: FailureCodes | undefined): boolean {
  if (codes?.http !== undefined && policy.httpStatusCodes) return inCodeSet(policy.httpStatusCodes, codes.http);
  if (codes?.grpc !== undefined && policy.grpcStatusCodes) return inCodeSet(policy.grpcStatusCodes, codes.grpc);
  return true;
}

/** The waits between tries: constant `duration`, or exponential from 500 ms ×1.5 (±50%) up to `maxInterval`. */
export function retryWaits(policy: RetrySettings, random?: () => number): () => number {
  if (policy.policy === 'constant') return () => policy.durationMs;
  const max = Math.max(1, policy.maxIntervalMs);
  const b = new Backoff({ initialMs: Math.min(500, max), maxMs: max, multiplier: 1.5, jitter: 0.5 }, random);
  return () => b.next();
}

export async function runPolicy<T>(p: ResolvedPolicy, op: (signal: AbortSignal) => Promise<T>, o: RunOptions<T> = {}): Promise<T> {
  const clock = o.clock ?? SYSTEM_CLOCK;
  // made at the first retry: a call that succeeds at once (most) needs none
  let nextWait: (() => number) | undefined;
  for (let tried = 0; ; tried++) {
    let report: ((ok: boolean) => void) | undefined;
    try {
      report = p.breaker?.admit();
    } catch (e) {
      o.observe?.('circuit-open');
      throw e;
    }
    const ac = new AbortController();
    const onCallerAbort = () => ac.abort(o.signal!.reason);
    o.signal?.addEventListener('abort', onCallerAbort, { once: true });
    let timer: { cancel(): void } | undefined;
    let failure: { error?: unknown; result?: T; codes?: FailureCodes };
    try {
      const attempt = op(ac.signal);
      const value = p.timeout
        ? await new Promise<T>((resolve, reject) => {
            const t = p.timeout!;
            timer = clock.after(t.ms, () => {
              const e = new PolicyTimeoutError(t.name, t.ms, p.target);
              ac.abort(e);
              reject(e);
            });
            attempt.then(resolve, reject);
          })
        : await attempt;
      const codes = o.failureOf?.(value);
      if (!codes) {
        report?.(true);
        o.observe?.('success');
        return value;
      }
      failure = { result: value, codes };
    } catch (e) {
      if (o.isRequestError?.(e)) {
        report?.(true);
        o.observe?.('success');
        throw e;
      }
      failure = { error: e, codes: e instanceof PolicyTimeoutError ? undefined : o.codesOf?.(e) };
      if (e instanceof PolicyTimeoutError) o.observe?.('timeout');
    } finally {
      timer?.cancel();
      o.signal?.removeEventListener('abort', onCallerAbort);
    }
    report?.(false);
    const again = p.retry && !o.signal?.aborted && (p.retry.maxRetries < 0 || tried < p.retry.maxRetries) && retries(p.retry, failure.codes);
    if (!again) {
      o.observe?.('failure');
      if ('error' in failure) throw failure.error;
      return failure.result as T;
    }
    o.observe?.('retry');
    if ('result' in failure) o.discard?.(failure.result as T);
    nextWait ??= retryWaits(p.retry!, o.random);
    if (!(await wait(nextWait(), { clock, signal: o.signal }))) throw o.signal?.reason ?? new Error('cancelled');
  }
}
