/**
 * The actor runtime's parsers and its turns, without a sidecar: timer/reminder times
 * (actors/schedule.ts), the app's actor settings (actors/config.ts) and one actor's turns
 * (actors/turns.ts), with fast-check.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseActorsConfig, DEFAULTS } from '../../sidecar/src/actors/config.ts';
import { nextFire, parseIsoDuration, parsePeriod, parseSchedule } from '../../sidecar/src/actors/schedule.ts';
import { StackDepthError, Turns } from '../../sidecar/src/actors/turns.ts';
import { formatDuration } from '../../shared/duration.ts';

const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);

describe('timer and reminder times', () => {
  it('reads the forms the reference accepts', () => {
    expect(parseSchedule({ dueTime: '1h30m', period: '500ms' }, NOW)).toEqual({ ok: true, value: { dueAt: NOW + 5_400_000, periodMs: 500 } });
    expect(parseSchedule({ dueTime: 'PT2H30M', period: 'R5/PT1S' }, NOW)).toEqual({ ok: true, value: { dueAt: NOW + 9_000_000, periodMs: 1000, repeats: 5 } });
    expect(parseSchedule({ dueTime: '2026-11-27T13:00:00Z', ttl: 'P1D' }, NOW)).toEqual({ ok: true, value: { dueAt: NOW + 3_600_000, expiresAt: NOW + 86_400_000 } });
    expect(parseSchedule({ dueTime: '2026-11-27T14:00:00+02:00' }, NOW)).toEqual({ ok: true, value: { dueAt: NOW } });
    expect(parseSchedule({}, NOW)).toEqual({ ok: true, value: { dueAt: NOW } });
    expect(parseIsoDuration('P1W')).toBe(7 * 86_400_000);
    expect(parseIsoDuration('PT0.5S')).toBe(500);
    for (const bad of ['P', 'PT', 'P1H', '1d', 'R/PT1S', 'R0/PT1S', '0s', '-1s', 'soon']) expect(parsePeriod(bad).ok, bad).toBe(false);
  });

  it('property: a Go duration as formatDuration writes it reads back, as period and as dueTime', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 ** 10 }), (ms) => {
        const text = formatDuration(ms);
        const p = parsePeriod(text);
        expect(p.ok && Math.abs(p.value.periodMs - ms)).toBeLessThan(1);
        const s = parseSchedule({ dueTime: text }, NOW);
        expect(s.ok && Math.abs(s.value.dueAt - NOW - ms)).toBeLessThan(1);
      }),
    );
  });

  it('property: an ISO 8601 duration made of its parts reads as their sum', () => {
    fc.assert(
      fc.property(fc.nat(30), fc.nat(23), fc.nat(59), fc.nat(59), (d, h, m, s) => {
        fc.pre(d + h + m + s > 0);
        const text = `P${d ? `${d}D` : ''}${h || m || s ? `T${h ? `${h}H` : ''}${m ? `${m}M` : ''}${s ? `${s}S` : ''}` : ''}`;
        expect(parseIsoDuration(text)).toBe(((d * 24 + h) * 60 + m) * 60_000 + s * 1000);
      }),
    );
  });

  it('property: any text gives a value or a reason naming its field, never a throw', () => {
    fc.assert(
      fc.property(fc.option(fc.string()), fc.option(fc.string()), fc.option(fc.string()), (dueTime, period, ttl) => {
        const r = parseSchedule({ dueTime: dueTime ?? undefined, period: period ?? undefined, ttl: ttl ?? undefined }, NOW);
        if (!r.ok) expect(r.reason).toMatch(/^(dueTime|period|ttl) /);
        else expect(Number.isFinite(r.value.dueAt)).toBe(true);
      }),
    );
  });

  it('property: fires stop after n repeats, and before the ttl', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 20 }), fc.option(fc.integer({ min: 1, max: 50_000 })), (periodMs, repeats, ttlMs) => {
        const s = { dueAt: NOW, periodMs, repeats, expiresAt: ttlMs === null ? undefined : NOW + ttlMs };
        let at = s.dueAt;
        let fired = 1;
        for (let next = nextFire(s, at, fired); next !== undefined; next = nextFire(s, at, fired)) {
          at = next;
          fired++;
          if (s.expiresAt !== undefined) expect(at).toBeLessThan(s.expiresAt);
        }
        expect(fired).toBeLessThanOrEqual(repeats);
        if (s.expiresAt === undefined) expect(fired).toBe(repeats);
      }),
    );
  });
});

describe("the app's actor settings", () => {
  it('takes the defaults, the app values and the per-type ones', () => {
    const c = parseActorsConfig({
      entities: ['A', 'B', 'A', 7],
      actorIdleTimeout: '10s',
      actorScanInterval: '1s',
      reentrancy: { enabled: true },
      entitiesConfig: [{ entities: ['B', 'Unknown'], actorIdleTimeout: '2s', reentrancy: { enabled: false, maxStackDepth: 3 } }],
    });
    expect(c.entities).toEqual(['A', 'B']);
    expect(c.scanIntervalMs).toBe(1000);
    expect(c.types.get('A')).toMatchObject({ idleTimeoutMs: 10_000, reentrancy: { enabled: true, maxStackDepth: 32 } });
    expect(c.types.get('B')).toMatchObject({ idleTimeoutMs: 2000, reentrancy: { enabled: false, maxStackDepth: 3 } });
    expect(c.types.has('Unknown')).toBe(false);
    expect(parseActorsConfig({ entities: ['A'], actorIdleTimeout: 'forever' })).toMatchObject({ ignored: ['actorIdleTimeout "forever"'] });
  });

  it('property: any JSON answer gives a config (types only from entities), never a throw', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (body) => {
        const c = parseActorsConfig(body);
        for (const t of c.types.keys()) expect(c.entities).toContain(t);
        expect(c.scanIntervalMs).toBeGreaterThan(0);
      }),
    );
    expect(parseActorsConfig(undefined).entities).toEqual([]);
    expect(DEFAULTS.idleTimeoutMs).toBe(3_600_000);
  });
});

describe("one actor's turns", () => {
  const on = { enabled: true, maxStackDepth: 3 };
  const off = { enabled: false, maxStackDepth: 32 };

  it('property: calls of different chains never hold the turn together, and all get it in order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', undefined), fc.nat(3)), { minLength: 1, maxLength: 30 }), async (calls) => {
        const turns = new Turns();
        const holding = new Set<string>();
        let max = 0;
        const order: number[] = [];
        await Promise.all(
          calls.map(async ([chain, ticks], i) => {
            const release = await turns.enter(chain, off);
            order.push(i);
            holding.add(`${i}`);
            max = Math.max(max, holding.size);
            for (let t = 0; t < ticks; t++) await Promise.resolve();
            holding.delete(`${i}`);
            release();
          }),
        );
        expect(max).toBe(1);
        expect(order).toEqual(calls.map((_, i) => i));
        expect(turns.busy).toBe(false);
      }),
    );
  });

  it('lets the holding chain back in up to the depth, and no one else', async () => {
    const turns = new Turns();
    const r1 = (await turns.enter('x', on)) as () => void;
    const r2 = (await turns.enter('x', on)) as () => void;
    const r3 = (await turns.enter('x', on)) as () => void;
    expect(() => turns.enter('x', on)).toThrow(StackDepthError);
    let other = false;
    const waiting = Promise.resolve(turns.enter('y', on)).then((r) => {
      other = true;
      return r;
    });
    r3();
    r2();
    await Promise.resolve();
    expect(other).toBe(false);
    r1();
    (await waiting)();
    expect(other).toBe(true);
    expect(turns.busy).toBe(false);
  });
});
