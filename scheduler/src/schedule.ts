/**
 * `schedule` values: six-field cron (seconds first; month and weekday names allowed),
 * `@every <duration>` and the `@yearly … @hourly` shortcuts. Cron evaluation is croner's;
 * this module only maps the shortcuts and turns croner's errors into messages that name
 * the field and its allowed range.
 */
import { Cron } from 'croner';
import { parseDuration } from '../../shared/duration.ts';
import { LATEST_MS, TOO_FAR, clip } from './times.ts';

export type Schedule = { kind: 'cron'; pattern: string } | { kind: 'every'; everyMs: number };

export type ScheduleParse = { ok: true; schedule: Schedule } | { ok: false; reason: string };

const SHORTCUTS: Record<string, string> = {
  '@yearly': '0 0 0 1 1 *',
  '@annually': '0 0 0 1 1 *',
  '@monthly': '0 0 0 1 * *',
  '@weekly': '0 0 0 * * 0',
  '@daily': '0 0 0 * * *',
  '@midnight': '0 0 0 * * *',
  '@hourly': '0 0 * * * *',
};

const FIELDS = [
  { name: 'seconds', allowed: '0-59' },
  { name: 'minutes', allowed: '0-59' },
  { name: 'hours', allowed: '0-23' },
  { name: 'day of month', allowed: '1-31' },
  { name: 'month', allowed: '1-12 or jan-dec' },
  { name: 'day of week', allowed: '0-6 or sun-sat' },
];

/** Shortest @every interval: a tighter loop would only measure the event loop. */
export const MIN_EVERY_MS = 1;

const parsed = new Map<string, ScheduleParse>();

/** Parses a schedule; good results are memoised (every trigger of a job asks again). */
export function parseSchedule(text: string): ScheduleParse {
  const hit = parsed.get(text);
  if (hit) return hit;
  const r = parseUncached(text);
  if (r.ok) {
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(text, r);
  }
  return r;
}

function parseUncached(text: string): ScheduleParse {
  const s = text.trim();
  if (s === '') return { ok: false, reason: 'is empty' };
  if (s.startsWith('@')) {
    const lower = s.toLowerCase();
    if (lower.startsWith('@every')) {
      const rest = s.slice('@every'.length).trim();
      const ms = parseDuration(rest);
      if (rest === '' || ms === undefined) return { ok: false, reason: `"${clip(s)}": @every needs a duration such as "@every 5s" or "@every 1h30m"` };
      if (ms < MIN_EVERY_MS) return { ok: false, reason: `"${clip(s)}": the @every interval must be at least 1ms` };
      // the same bound as dueTime and ttl: the first fire must be a time a job can hold
      if (Date.now() + ms > LATEST_MS) return { ok: false, reason: `"${clip(s)}": the @every interval is too long; ${TOO_FAR}` };
      return { ok: true, schedule: { kind: 'every', everyMs: ms } };
    }
    const pattern = SHORTCUTS[lower];
    if (!pattern) return { ok: false, reason: `"${clip(s)}" is not a known period; use @every <duration>, ${Object.keys(SHORTCUTS).join(', ')}` };
    return { ok: true, schedule: { kind: 'cron', pattern } };
  }
  const fields = s.split(/\s+/);
  if (fields.length !== 6) {
    return {
      ok: false,
      reason: `"${clip(s)}" has ${fields.length} field${fields.length === 1 ? '' : 's'}; a cron schedule has 6: seconds minutes hours day-of-month month day-of-week`,
    };
  }
  // Ask croner about each field on its own, so the message can say which one is wrong.
  for (let i = 0; i < 6; i++) {
    const probe = fields.map((f, j) => (j === i ? f : '*')).join(' ');
    const err = cronError(probe);
    if (err) return { ok: false, reason: `field ${i + 1} (${FIELDS[i].name}) "${clip(fields[i], 40)}" is not valid: allowed ${FIELDS[i].allowed}, with , - / and * (${err})` };
  }
  const err = cronError(fields.join(' '));
  if (err) return { ok: false, reason: `"${clip(s)}" is not a valid cron schedule: ${err}` };
  // a pattern that can never match (e.g. 30 February) would otherwise park the job forever
  if (cronFor(fields.join(' ')).nextRun(new Date()) === null) return { ok: false, reason: `"${clip(s)}" never matches a date` };
  return { ok: true, schedule: { kind: 'cron', pattern: fields.join(' ') } };
}

function cronError(pattern: string): string | undefined {
  try {
    cronFor(pattern);
    return undefined;
  } catch (e) {
    return (e as Error).message.replace(/^CronPattern:\s*/, '');
  }
}

// Croner objects are cheap but not free; thousands of jobs share a few patterns.
const cache = new Map<string, Cron>();

function cronFor(pattern: string): Cron {
  let c = cache.get(pattern);
  if (!c) {
    c = new Cron(pattern, { paused: true, mode: '6-part' });
    if (cache.size > 1000) cache.clear();
    cache.set(pattern, c);
  }
  return c;
}

/** The first fire strictly after `after` (ms since epoch); null when there is none. */
export function nextAfter(schedule: Schedule, after: number): number | null {
  if (schedule.kind === 'every') return after + schedule.everyMs;
  const next = cronFor(schedule.pattern).nextRun(new Date(after));
  return next ? next.getTime() : null;
}
