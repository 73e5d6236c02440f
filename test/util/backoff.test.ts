/**
 * The one exponential backoff (shared/backoff.ts): its waits stay within the cap,
 * grow without jitter, start over after a reset, and `wait` runs on a Clock and an AbortSignal.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, wait, type BackoffPolicy, type Jitter } from '../../shared/backoff.ts';
import { ManualClock } from '../../shared/clock.ts';

const policy = fc
  .record({
    initialMs: fc.integer({ min: 1, max: 10_000 }),
    extra: fc.integer({ min: 0, max: 600_000 }),
    multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
    jitter: fc.oneof(fc.constant<Jitter>('none'), fc.constant<Jitter>('full'), fc.constant<Jitter>('equal'), fc.double({ min: 0.01, max: 1, noNaN: true })),
  })
  .map(({ initialMs, extra, multiplier, jitter }): BackoffPolicy => ({ initialMs, maxMs: initialMs + extra, multiplier, jitter }));

/** Math.random's range, [0, 1), its ends included. */
const randoms = fc.array(fc.oneof(fc.constant(0), fc.constant(1 - Number.EPSILON), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })), { minLength: 1, maxLength: 64 });

const takeFrom = (values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length];
};

describe('backoff', () => {
  it('never waits longer than the cap, nor less than nothing, with any jitter', () => {
    fc.assert(
      fc.property(policy, randoms, fc.integer({ min: 1, max: 200 }), (p, rs, n) => {
        const b = new Backoff(p, takeFrom(rs));
        for (let i = 0; i < n; i++) {
          const d = b.next();
          expect(d).toBeGreaterThanOrEqual(0);
          expect(d).toBeLessThanOrEqual(p.maxMs);
        }
      }),
    );
  });

  it('without jitter, starts at initialMs and grows monotonically to the cap, then stays there', () => {
    fc.assert(
      fc.property(policy, fc.integer({ min: 1, max: 200 }), (p, n) => {
        const b = new Backoff({ ...p, jitter: 'none' });
        const waits = Array.from({ length: n }, () => b.next());
        expect(waits[0]).toBe(p.initialMs);
        for (let i = 1; i < n; i++) {
          expect(waits[i]).toBeGreaterThanOrEqual(waits[i - 1]);
          if (waits[i - 1] === p.maxMs) expect(waits[i]).toBe(p.maxMs);
        }
        expect(b.attempts).toBe(n);
      }),
    );
  });

  it('a reset starts the waits over', () => {
    fc.assert(
      fc.property(policy, fc.integer({ min: 0, max: 50 }), fc.integer({ min: 1, max: 50 }), (p, before, after) => {
        const none = { ...p, jitter: 'none' as const };
        const b = new Backoff(none);
        for (let i = 0; i < before; i++) b.next();
        b.reset();
        expect(b.attempts).toBe(0);
        const fresh = new Backoff(none);
        for (let i = 0; i < after; i++) expect(b.next()).toBe(fresh.next());
      }),
    );
  });

  it('jitter spreads each wait within its bounds', () => {
    fc.assert(
      fc.property(policy, randoms, fc.integer({ min: 0, max: 60 }), (p, rs, attempt) => {
        const base = backoffDelay(p, attempt);
        const b = new Backoff(p, takeFrom(rs));
        for (let i = 0; i < attempt; i++) b.next();
        const d = b.next();
        const j = p.jitter;
        if (j === 'full') expect(d).toBeLessThanOrEqual(base);
        else if (j === 'equal') expect(d).toBeGreaterThanOrEqual(base / 2);
        else if (typeof j === 'number') expect(d).toBeGreaterThanOrEqual(base * (1 - j) - 1e-9);
        else expect(d).toBe(base);
      }),
    );
  });

  it('the numbers its callers use', () => {
    const waits = (p: BackoffPolicy, n: number) => {
      const b = new Backoff(p);
      return Array.from({ length: n }, () => b.next());
    };
    // the scheduler client's stream reopen
    expect(waits({ initialMs: 100, maxMs: 500 }, 5)).toEqual([100, 200, 400, 500, 500]);
    // the operator's work queue
    expect(waits({ initialMs: 100, maxMs: 30_000 }, 11)).toEqual([100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
    // a ±20% jitter
    const low = new Backoff({ initialMs: 200, maxMs: 10_000, jitter: 0.2 }, () => 0);
    expect([low.next(), low.next()]).toEqual([160, 320]);
    const high = new Backoff({ initialMs: 200, maxMs: 10_000, jitter: 0.2 }, () => 0.5);
    expect(high.next()).toBeCloseTo(200);
  });

  it('refuses a policy that cannot back off', () => {
    expect(() => new Backoff({ initialMs: 0, maxMs: 10 })).toThrow(RangeError);
    expect(() => new Backoff({ initialMs: 10, maxMs: 5 })).toThrow(RangeError);
    expect(() => new Backoff({ initialMs: 10, maxMs: 50, multiplier: 0.5 })).toThrow(RangeError);
    expect(() => new Backoff({ initialMs: 10, maxMs: 50, jitter: 1.5 })).toThrow(RangeError);
  });
});

describe('wait', () => {
  it('resolves true once its time has passed on the clock', async () => {
    const clock = new ManualClock();
    let done: boolean | undefined;
    void wait(1000, { clock }).then((v) => (done = v));
    await clock.advance(999);
    expect(done).toBeUndefined();
    await clock.advance(1);
    expect(done).toBe(true);
  });

  it('resolves false at once when aborted, and leaves no timer behind', async () => {
    const clock = new ManualClock();
    const ac = new AbortController();
    const waiting = wait(60_000, { clock, signal: ac.signal });
    expect(clock.pending).toBe(1);
    ac.abort();
    expect(await waiting).toBe(false);
    expect(clock.pending).toBe(0);
    expect(await wait(10, { clock, signal: ac.signal })).toBe(false);
    expect(clock.pending).toBe(0);
  });
});
