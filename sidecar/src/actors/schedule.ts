/**
 * When timers and reminders fire, from the texts the reference runtime accepts:
 * - dueTime: an RFC 3339 time, a Go duration (`2h30m`, `500ms`) or an ISO 8601 duration
 *   (`PT2H30M`); absent = now;
 * - period: a Go duration, an ISO 8601 duration, or `R<n>/<ISO duration>` (n fires at most);
 *   absent = fire once;
 * - ttl: like dueTime; after it no more fires.
 * Each parse gives either the value or the reason it is refused (the caller's 400).
 */
import { parseDuration } from '../../../shared/duration.ts';

export interface FireSchedule {
  /** First fire, ms since epoch. */
  dueAt: number;
  /** Between fires; undefined = once. */
  periodMs?: number;
  /** Fires left; undefined = no limit (until ttl or removal). */
  repeats?: number;
  /** No fire at or after this instant (ms since epoch). */
  expiresAt?: number;
}

export interface ScheduleText {
  dueTime?: string;
  period?: string;
  ttl?: string;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Bounds every instant (a JS timer and the scheduler both take it): year 9999. */
const LATEST = Date.UTC(9999, 11, 31);

/** PnYnMnWnDTnHnMnS, with fractions on the last field; years and months as 365 and 30 days. */
const ISO_DURATION = /^P(?!$)(?:(\d+(?:[.,]\d+)?)Y)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?=\d)(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/i;
const ISO_UNITS_MS = [365 * 86_400_000, 30 * 86_400_000, 7 * 86_400_000, 86_400_000, 3_600_000, 60_000, 1000];
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

export function parseIsoDuration(text: string): number | undefined {
  const m = ISO_DURATION.exec(text);
  if (!m) return undefined;
  let total = 0;
  for (let i = 0; i < ISO_UNITS_MS.length; i++) if (m[i + 1]) total += Number(m[i + 1]!.replace(',', '.')) * ISO_UNITS_MS[i]!;
  return total;
}

/** A Go or ISO 8601 duration in ms; negative ones are refused. */
export function parseAnyDuration(text: string): number | undefined {
  const t = text.trim();
  const ms = parseDuration(t) ?? parseIsoDuration(t);
  return ms !== undefined && ms >= 0 && Number.isFinite(ms) ? ms : undefined;
}

/** dueTime or ttl: a point in time, or a duration from `now`. */
export function parseInstant(text: string, now: number, what: string): Parsed<number> {
  const t = text.trim();
  if (RFC3339.test(t)) {
    const at = Date.parse(t.replace(' ', 'T'));
    if (Number.isFinite(at)) return at > LATEST ? { ok: false, reason: `${what} "${clip(t)}" is after the year 9999` } : { ok: true, value: at };
  }
  const ms = parseAnyDuration(t);
  if (ms === undefined) return { ok: false, reason: `${what} "${clip(t)}" is neither an RFC 3339 time, a Go duration (e.g. 5s) nor an ISO 8601 duration (e.g. PT5S)` };
  if (now + ms > LATEST) return { ok: false, reason: `${what} "${clip(t)}" is too far in the future` };
  return { ok: true, value: now + ms };
}

/** period: a duration, or R<n>/<ISO duration>. */
export function parsePeriod(text: string): Parsed<{ periodMs: number; repeats?: number }> {
  const t = text.trim();
  const rep = /^R(\d+)\/(.*)$/i.exec(t);
  const ms = parseAnyDuration(rep ? rep[2]! : t);
  if (ms === undefined) return { ok: false, reason: `period "${clip(t)}" is neither a Go duration (e.g. 5s), an ISO 8601 duration (e.g. PT5S) nor R<n>/<ISO duration> (e.g. R5/PT1S)` };
  if (ms === 0) return { ok: false, reason: `period "${clip(t)}" is zero: leave it out to fire once` };
  if (ms > LATEST) return { ok: false, reason: `period "${clip(t)}" is too long` };
  if (!rep) return { ok: true, value: { periodMs: ms } };
  const repeats = Number(rep[1]);
  if (!Number.isSafeInteger(repeats) || repeats < 1) return { ok: false, reason: `period "${clip(t)}" repeats ${rep[1]} times: give 1 or more` };
  return { ok: true, value: { periodMs: ms, repeats } };
}

/** The whole schedule, or the first reason it is refused. */
export function parseSchedule(s: ScheduleText, now: number): Parsed<FireSchedule> {
  let dueAt = now;
  if (s.dueTime !== undefined && s.dueTime.trim() !== '') {
    const d = parseInstant(s.dueTime, now, 'dueTime');
    if (!d.ok) return d;
    dueAt = d.value;
  }
  const out: FireSchedule = { dueAt };
  if (s.period !== undefined && s.period.trim() !== '') {
    const p = parsePeriod(s.period);
    if (!p.ok) return p;
    out.periodMs = p.value.periodMs;
    if (p.value.repeats !== undefined) out.repeats = p.value.repeats;
  }
  if (s.ttl !== undefined && s.ttl.trim() !== '') {
    const t = parseInstant(s.ttl, now, 'ttl');
    if (!t.ok) return t;
    if (t.value <= dueAt) return { ok: false, reason: `ttl "${clip(s.ttl)}" ends before the first fire (dueTime)` };
    out.expiresAt = t.value;
  }
  return { ok: true, value: out };
}

/** The fire after one at `at`, or undefined when the schedule is over. `fired`: fires so far. */
export function nextFire(s: FireSchedule, at: number, fired: number): number | undefined {
  if (s.periodMs === undefined) return undefined;
  if (s.repeats !== undefined && fired >= s.repeats) return undefined;
  const next = at + s.periodMs;
  if (s.expiresAt !== undefined && next >= s.expiresAt) return undefined;
  return next;
}

function clip(s: string): string {
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}
