/**
 * Policies at work, on fake time: retries (constant and exponential, with their limits and
 * matching), a timeout that aborts the call underneath and ends the wait even when the call does
 * not stop, a circuit breaker that opens, half-opens and closes at the times its policy says, and a
 * caller's cancellation that ends the retries.
 */
import { describe, expect, it } from 'vitest';
import { CircuitBreaker, CircuitOpenError } from '../../sidecar/src/resiliency/breaker.ts';
import { PolicyTimeoutError, runPolicy, type Outcome, type ResolvedPolicy } from '../../sidecar/src/resiliency/run.ts';
import type { RetrySettings } from '../../sidecar/src/resiliency/spec.ts';
import { parseTrip } from '../../sidecar/src/resiliency/trip.ts';
import { ManualClock } from '../../shared/clock.ts';

const retry = (o: Partial<RetrySettings>): RetrySettings => ({ name: 'r', policy: 'constant', durationMs: 1000, maxIntervalMs: 60_000, maxRetries: -1, ...o });

/** An operation that fails `n` times (thrown errors with an HTTP code), then answers 'ok'. */
function failing(n: number, code = 503) {
  const calls: number[] = [];
  return {
    calls,
    op: (clock: ManualClock) => async () => {
      calls.push(clock.now());
      if (calls.length <= n) throw Object.assign(new Error(`failed ${calls.length}`), { status: code });
      return 'ok';
    },
  };
}

/** Runs `p` while moving the clock until it settles. */
async function settle<T>(clock: ManualClock, p: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  let done: { value?: T; error?: unknown } | undefined;
  p.then((value) => (done = { value }), (error) => (done = { error }));
  for (let i = 0; i < 10_000 && !done; i++) {
    await new Promise((r) => setImmediate(r));
    if (!done) await clock.advance(clock.next !== undefined ? clock.next - clock.now() : 0);
  }
  return done!;
}

const codesOf = (e: unknown) => ({ http: (e as { status?: number }).status });

describe('retries', () => {
  it('constant: retries every duration until the call succeeds', async () => {
    const clock = new ManualClock(0);
    const f = failing(3);
    const out = await settle(clock, runPolicy({ target: 'app:b', retry: retry({ durationMs: 1000 }) }, f.op(clock), { clock, codesOf }));
    expect(out.value).toBe('ok');
    expect(f.calls).toEqual([0, 1000, 2000, 3000]);
  });

  it('stops after maxRetries and gives the last failure', async () => {
    const clock = new ManualClock(0);
    const f = failing(10);
    const seen: Outcome[] = [];
    const out = await settle(clock, runPolicy({ target: 'app:b', retry: retry({ maxRetries: 2 }) }, f.op(clock), { clock, codesOf, observe: (o) => seen.push(o) }));
    expect((out.error as Error).message).toBe('failed 3');
    expect(f.calls).toHaveLength(3);
    expect(seen).toEqual(['retry', 'retry', 'failure']);
  });

  it('maxRetries 0 tries once', async () => {
    const clock = new ManualClock(0);
    const f = failing(1);
    const out = await settle(clock, runPolicy({ target: 'app:b', retry: retry({ maxRetries: 0 }) }, f.op(clock), { clock, codesOf }));
    expect(out.error).toBeInstanceOf(Error);
    expect(f.calls).toHaveLength(1);
  });

  it('exponential: waits grow by about 1.5 from 500 ms, never above maxInterval', async () => {
    const clock = new ManualClock(0);
    const f = failing(8);
    await settle(clock, runPolicy({ target: 'app:b', retry: retry({ policy: 'exponential', maxIntervalMs: 3000 }) }, f.op(clock), { clock, codesOf, random: () => 0.5 }));
    const waits = f.calls.slice(1).map((t, i) => t - f.calls[i]);
    expect(waits).toEqual([500, 750, 1125, 1687.5, 2531.25, 3000, 3000, 3000]);
  });

  it('matching: only listed codes are retried; an answer that is a failure counts too', async () => {
    const clock = new ManualClock(0);
    const only5xx = retry({ maxRetries: 5, httpStatusCodes: [[429, 429], [500, 599]] });
    const notListed = failing(3, 404);
    const a = await settle(clock, runPolicy({ target: 'app:b', retry: only5xx }, notListed.op(clock), { clock, codesOf }));
    expect(a.error).toBeInstanceOf(Error);
    expect(notListed.calls).toHaveLength(1);
    // answers (not errors) with a failure status, as an app's HTTP reply
    const answers = [503, 429, 200];
    let i = 0;
    const b = await settle(clock, runPolicy({ target: 'app:b', retry: only5xx }, async () => ({ status: answers[i++] }), { clock, failureOf: (r) => (r.status >= 500 || r.status === 429 ? { http: r.status } : undefined) }));
    expect(b.value).toEqual({ status: 200 });
    expect(i).toBe(3);
  });
});

describe('timeouts', () => {
  it('aborts the call underneath and fails the try, even when the call ignores the signal', async () => {
    const clock = new ManualClock(0);
    const signals: AbortSignal[] = [];
    const out = await settle(clock, runPolicy({ target: 'component:s/outbound', timeout: { name: 'general', ms: 5000 } }, (signal) => {
      signals.push(signal);
      return new Promise(() => {}); // never answers
    }, { clock }));
    expect(out.error).toBeInstanceOf(PolicyTimeoutError);
    expect((out.error as Error).message).toMatch(/timeout policy "general" \(5000 ms\) ran out calling component:s\/outbound/);
    expect(signals[0].aborted).toBe(true);
    expect(clock.now()).toBe(5000);
  });

  it('each try has its own timeout, and a timed-out try is retried', async () => {
    const clock = new ManualClock(0);
    let n = 0;
    const out = await settle(clock, runPolicy({ target: 'app:b', timeout: { name: 't', ms: 100 }, retry: retry({ durationMs: 10, maxRetries: 3 }) }, () => (++n < 3 ? new Promise<string>(() => {}) : Promise.resolve('late but fine')), { clock }));
    expect(out.value).toBe('late but fine');
    expect(clock.now()).toBe(220);
  });
});

describe('circuit breakers', () => {
  const settings = { name: 'simpleCB', maxRequests: 2, intervalMs: 0, timeoutMs: 30_000, trip: parseTrip('consecutiveFailures >= 3') };

  it('opens after the trip, refuses at once naming the policy, half-opens after its timeout and closes after maxRequests successes', async () => {
    const clock = new ManualClock(0);
    const cb = new CircuitBreaker(settings, clock);
    const changes: string[] = [];
    cb.onChange = (from, to) => changes.push(`${clock.now()} ${from}->${to}`);
    const p: ResolvedPolicy = { target: 'app:b', breaker: cb };
    const fail = () => runPolicy(p, () => Promise.reject(new Error('down')), { clock });
    for (let i = 0; i < 3; i++) await expect(fail()).rejects.toThrow('down');
    expect(cb.state).toBe('open');
    let called = false;
    await expect(runPolicy(p, async () => (called = true), { clock })).rejects.toThrow(new CircuitOpenError('simpleCB', 'open'));
    expect(called).toBe(false);
    await clock.advance(29_999);
    expect(cb.state).toBe('open');
    await clock.advance(1);
    expect(cb.state).toBe('half-open');
    // two trial calls at once pass, a third is refused
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const trials = [runPolicy(p, () => gate.then(() => 'a'), { clock }), runPolicy(p, () => gate.then(() => 'b'), { clock })];
    await expect(runPolicy(p, async () => 'c', { clock })).rejects.toThrow(/half-open/);
    release();
    expect(await Promise.all(trials)).toEqual(['a', 'b']);
    expect(cb.state).toBe('closed');
    expect(changes).toEqual(['0 closed->open', '30000 open->half-open', '30000 half-open->closed']);
  });

  it('a failure while half-open opens it again; an open circuit is not retried', async () => {
    const clock = new ManualClock(0);
    const cb = new CircuitBreaker({ ...settings, trip: parseTrip('consecutiveFailures > 0') }, clock);
    let calls = 0;
    const p: ResolvedPolicy = { target: 'app:b', breaker: cb, retry: retry({ durationMs: 1000 }) };
    const out = await settle(clock, runPolicy(p, async () => {
      calls++;
      throw new Error('down');
    }, { clock }));
    expect(out.error).toBeInstanceOf(CircuitOpenError);
    expect(calls).toBe(1);
    await clock.advance(30_000);
    await expect(runPolicy({ target: 'app:b', breaker: cb }, () => Promise.reject(new Error('still down')), { clock })).rejects.toThrow('still down');
    expect(cb.state).toBe('open');
  });

  it('with an interval, a closed breaker counts afresh each interval', async () => {
    const clock = new ManualClock(0);
    const cb = new CircuitBreaker({ ...settings, intervalMs: 10_000, trip: parseTrip('totalFailures >= 3') }, clock);
    for (let i = 0; i < 2; i++) cb.admit()(false);
    await clock.advance(10_000);
    expect(cb.current.totalFailures).toBe(0);
    for (let i = 0; i < 2; i++) cb.admit()(false);
    expect(cb.state).toBe('closed');
    cb.admit()(false);
    expect(cb.state).toBe('open');
  });

  it('an outcome reported after the state changed does not count', async () => {
    const clock = new ManualClock(0);
    const cb = new CircuitBreaker({ ...settings, trip: parseTrip('consecutiveFailures >= 1') }, clock);
    const late = cb.admit();
    cb.admit()(false);
    expect(cb.state).toBe('open');
    await clock.advance(30_000);
    late(true); // from the closed generation: ignored
    expect(cb.state).toBe('half-open');
    expect(cb.current.totalSuccesses).toBe(0);
  });
});

describe('cancellation', () => {
  it("the caller's signal ends the retries and aborts the try in flight", async () => {
    const clock = new ManualClock(0);
    const ac = new AbortController();
    const seen: AbortSignal[] = [];
    const run = runPolicy({ target: 'app:b', retry: retry({ durationMs: 1000 }) }, (signal) => {
      seen.push(signal);
      return Promise.reject(new Error('down'));
    }, { clock, signal: ac.signal });
    await new Promise((r) => setImmediate(r));
    ac.abort(new Error('caller gave up'));
    await expect(run).rejects.toThrow('caller gave up');
    expect(seen).toHaveLength(1);
  });
});
