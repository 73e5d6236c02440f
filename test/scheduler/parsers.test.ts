import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextAfter, parseSchedule } from '../../scheduler/src/schedule.ts';
import { parseTimeValue } from '../../scheduler/src/times.ts';
import { buildRecord, nextFire } from '../../scheduler/src/validate.ts';
import { SchedulerError, type JobKey } from '../../scheduler/src/types.ts';

const KEY: JobKey = { namespace: 'default', appId: 'a', owner: '', name: 'j' };
const NOW = new Date('2026-03-10T12:00:00Z').getTime();

describe('schedule parser', () => {
  it('maps the period shortcuts to their cron equivalents', () => {
    const expected: Record<string, string> = {
      '@yearly': '0 0 0 1 1 *',
      '@annually': '0 0 0 1 1 *',
      '@monthly': '0 0 0 1 * *',
      '@weekly': '0 0 0 * * 0',
      '@daily': '0 0 0 * * *',
      '@midnight': '0 0 0 * * *',
      '@hourly': '0 0 * * * *',
    };
    for (const [k, v] of Object.entries(expected)) expect(parseSchedule(k)).toEqual({ ok: true, schedule: { kind: 'cron', pattern: v } });
  });

  it('reads @every with Go durations', () => {
    expect(parseSchedule('@every 1h30m')).toEqual({ ok: true, schedule: { kind: 'every', everyMs: 5_400_000 } });
    expect(parseSchedule('@every 500ms')).toEqual({ ok: true, schedule: { kind: 'every', everyMs: 500 } });
    expect(parseSchedule('@every 0s').ok).toBe(false);
    expect(parseSchedule('@every -1s').ok).toBe(false);
  });

  it('evaluates six-field cron with seconds first and month/weekday names (local time)', () => {
    const p = parseSchedule('30 15 10 * jan-mar mon');
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    const from = new Date(2026, 0, 1, 0, 0, 0).getTime(); // Thursday 1 Jan 2026, local
    const next = new Date(nextAfter(p.schedule, from)!);
    // the first Monday of January 2026 is the 5th
    expect([next.getMonth(), next.getDate(), next.getHours(), next.getMinutes(), next.getSeconds(), next.getDay()]).toEqual([0, 5, 10, 15, 30, 1]);
    const after = new Date(nextAfter(p.schedule, next.getTime())!);
    expect([after.getMonth(), after.getDate()]).toEqual([0, 12]);
  });

  it('names the wrong cron field and its allowed range', () => {
    const cases: [string, RegExp][] = [
      ['60 * * * * *', /field 1 \(seconds\).*allowed 0-59/],
      ['* 60 * * * *', /field 2 \(minutes\).*allowed 0-59/],
      ['* * 24 * * *', /field 3 \(hours\).*allowed 0-23/],
      ['* * * 0 * *', /field 4 \(day of month\).*allowed 1-31/],
      ['* * * * 0 *', /field 5 \(month\).*allowed 1-12 or jan-dec/],
      ['* * * * foo *', /field 5 \(month\)/],
      ['* * * * * 8', /field 6 \(day of week\).*allowed 0-6 or sun-sat/],
      ['*/0 * * * * *', /field 1 \(seconds\)/],
      ['0 0 0 30 2 *', /never matches/],
    ];
    for (const [s, re] of cases) {
      const r = parseSchedule(s);
      expect(r.ok, s).toBe(false);
      if (!r.ok) expect(r.reason, s).toMatch(re);
    }
    const five = parseSchedule('* * * * *');
    expect(!five.ok && five.reason).toMatch(/has 5 fields; a cron schedule has 6/);
  });

  it('never throws, and every accepted schedule yields a next fire after the start', () => {
    const field = fc.oneof(fc.constantFrom('*', '?', '0', '5', '59', '60', '1-5', '*/15', 'jan', 'mon-fri', 'L', '5,10', '-', '*/0', '1/2'), fc.string({ maxLength: 4 }));
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.array(field, { minLength: 0, maxLength: 8 }).map((f) => f.join(' ')),
      fc.tuple(fc.constantFrom('@every ', '@', '@hourly', '@daily '), fc.string({ maxLength: 10 })).map(([a, b]) => a + b),
    );
    fc.assert(
      fc.property(text, (s) => {
        const r = parseSchedule(s);
        if (r.ok) {
          const n = nextAfter(r.schedule, NOW);
          expect(n === null || n > NOW).toBe(true);
        } else expect(r.reason.length).toBeGreaterThan(0);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('dueTime/ttl parser', () => {
  it('honours RFC 3339 offsets and reads a missing offset as local time', () => {
    expect(parseTimeValue('2026-03-10T12:00:00Z', 0)).toEqual({ ok: true, at: NOW });
    expect(parseTimeValue('2026-03-10T14:00:00+02:00', 0)).toEqual({ ok: true, at: NOW });
    expect(parseTimeValue('2026-03-10T07:30:00-04:30', 0)).toEqual({ ok: true, at: NOW });
    expect(parseTimeValue('2026-03-10T12:00:00.250Z', 0)).toEqual({ ok: true, at: NOW + 250 });
    expect(parseTimeValue('2026-03-10T12:00:00', 0)).toEqual({ ok: true, at: new Date(2026, 2, 10, 12, 0, 0).getTime() });
  });

  it('counts Go and ISO 8601 durations from the creation time', () => {
    expect(parseTimeValue('1h30m', NOW)).toEqual({ ok: true, at: NOW + 5_400_000 });
    expect(parseTimeValue('500ms', NOW)).toEqual({ ok: true, at: NOW + 500 });
    expect(parseTimeValue('PT10S', NOW)).toEqual({ ok: true, at: NOW + 10_000 });
    expect(parseTimeValue('P1DT2H', NOW)).toEqual({ ok: true, at: (() => { const d = new Date(NOW); d.setDate(d.getDate() + 1); return d.getTime() + 7_200_000; })() });
    expect(parseTimeValue('PT1.5S', NOW)).toEqual({ ok: true, at: NOW + 1500 });
  });

  it('rejects what is not a time, saying why', () => {
    const cases: [string, RegExp][] = [
      ['', /empty/],
      ['soon', /not a time/],
      ['10 parsecs', /not a duration/],
      ['-1s', /negative/],
      ['R3/PT1S', /repeating/],
      ['P', /not an ISO 8601 duration/],
      ['PT', /not an ISO 8601 duration/],
      ['2026-13-01T00:00:00Z', /month 13/],
      ['2026-02-29T00:00:00Z', /day 29/],
      ['2026-01-01T24:00:00Z', /hour 24/],
      ['2026-01-01', /not an RFC 3339 time/],
      ['9999999999h', /too far/],
    ];
    for (const [s, re] of cases) {
      const r = parseTimeValue(s, NOW);
      expect(r.ok, s).toBe(false);
      if (!r.ok) expect(r.reason, s).toMatch(re);
    }
  });

  it('never throws and accepted values are real instants', () => {
    const piece = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.date({ noInvalidDate: true, min: new Date('1970-01-01'), max: new Date('2200-01-01') }).map((d) => d.toISOString()),
      fc.tuple(fc.nat(10_000), fc.constantFrom('ns', 'us', 'ms', 's', 'm', 'h', 'x', '')).map(([n, u]) => `${n}${u}`),
      fc.tuple(fc.nat(99), fc.constantFrom('PT', 'P', 'P1Y', 'R1/P'), fc.constantFrom('S', 'M', 'H', 'D', 'W', '')).map(([n, p, u]) => `${p}${n}${u}`),
    );
    fc.assert(
      fc.property(piece, (s) => {
        const r = parseTimeValue(s, NOW);
        if (r.ok) expect(Number.isFinite(r.at)).toBe(true);
        else expect(r.reason).toBeTruthy();
      }),
      { numRuns: 3000 },
    );
  });

  it('round-trips every ISO timestamp', () => {
    fc.assert(
      fc.property(fc.date({ noInvalidDate: true, min: new Date('1970-01-01'), max: new Date('9999-01-01') }), (d) => {
        expect(parseTimeValue(d.toISOString(), 0)).toEqual({ ok: true, at: d.getTime() });
      }),
    );
  });
});

describe('job records', () => {
  const build = (spec: Parameters<typeof buildRecord>[1]) => buildRecord(KEY, spec, NOW, 'g');

  it('dueTime only fires once; schedule only starts at the next cron time; both start at dueTime', () => {
    const once = build({ dueTime: '10s' });
    expect(once.nextAt).toBe(NOW + 10_000);
    once.count = 1;
    expect(nextFire(once, once.nextAt!)).toBeNull();

    const cron = build({ schedule: '0 * * * * *' });
    expect(cron.nextAt).toBe(NOW + 60_000);

    const both = build({ schedule: '@every 1m', dueTime: '5s' });
    expect(both.nextAt).toBe(NOW + 5000);
    both.count = 1;
    expect(nextFire(both, both.nextAt!)).toBe(NOW + 65_000);
  });

  it('stops after repeats and at ttl', () => {
    const r = build({ schedule: '@every 1s', repeats: 2 });
    r.count = 1;
    expect(nextFire(r, r.nextAt!)).toBe(NOW + 2000);
    r.count = 2;
    expect(nextFire(r, NOW + 2000)).toBeNull();

    const t = build({ schedule: '@every 1s', ttl: '2500ms' });
    t.count = 1;
    expect(nextFire(t, NOW + 1000)).toBe(NOW + 2000);
    expect(nextFire(t, NOW + 2000)).toBeNull();
  });

  it('rejects specs with codes naming the field', () => {
    const codeOf = (spec: Parameters<typeof buildRecord>[1]) => {
      try {
        build(spec);
        return 'ok';
      } catch (e) {
        return (e as SchedulerError).errorCode;
      }
    };
    expect(codeOf({})).toBe('RT_SCHEDULER_SCHEDULE_EMPTY');
    expect(codeOf({ schedule: '  ' })).toBe('RT_SCHEDULER_SCHEDULE_EMPTY');
    expect(codeOf({ schedule: 'x' })).toBe('RT_SCHEDULER_SCHEDULE_INVALID');
    expect(codeOf({ dueTime: 'x' })).toBe('RT_SCHEDULER_DUE_TIME_INVALID');
    expect(codeOf({ dueTime: '1s', ttl: 'x' })).toBe('RT_SCHEDULER_TTL_INVALID');
    expect(codeOf({ dueTime: '1s', repeats: -1 })).toBe('RT_SCHEDULER_REPEATS_INVALID');
    expect(() => buildRecord({ ...KEY, name: '' }, { dueTime: '1s' }, NOW, 'g')).toThrow(/empty/);
    // "." and ".." are URL path steps (clients normalise them away), so they are not names
    for (const name of ['.', '..']) expect(() => buildRecord({ ...KEY, name }, { dueTime: '1s' }, NOW, 'g')).toThrow(/path step/);
    expect(buildRecord({ ...KEY, name: '...' }, { dueTime: '1s' }, NOW, 'g').key.name).toBe('...');
  });
});
