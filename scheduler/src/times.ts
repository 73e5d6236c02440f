/**
 * dueTime and ttl values: an RFC 3339 point in time (its offset honoured; none → the server's
 * local time), a Go-style duration counted from the job's creation ("1h30m", "500ms"), or a
 * non-repeating ISO 8601 duration ("PT10S", "P1DT2H"), also counted from creation.
 */
import { parseDuration } from '../../shared/duration.ts';

/**
 * The one bound every time value of a job is checked against (dueTime, ttl, each fire of a
 * schedule): RFC 3339's last instant. It keeps every stored time a safe integer, which SQLite
 * and etcd give back exactly (a later one once stopped the scheduler at load).
 */
export const LATEST_MS = Date.parse('9999-12-31T23:59:59.999Z');
export const LATEST_TEXT = '9999-12-31T23:59:59Z';
/** Year 0000, the earliest RFC 3339 time (a past dueTime fires at once). */
const EARLIEST_MS = Date.parse('0000-01-01T00:00:00Z');

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$/;
const ISO_DURATION =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;

export type TimeParse = { ok: true; at: number } | { ok: false; reason: string };

/** Resolves a dueTime/ttl text to ms since epoch, relative to `createdAt` for durations. */
export function parseTimeValue(text: string, createdAt: number): TimeParse {
  const s = text.trim();
  if (s === '') return { ok: false, reason: 'is empty' };
  if (/^R\d*\//i.test(s)) return { ok: false, reason: `"${clip(s)}" is a repeating ISO 8601 interval; only non-repeating values are allowed (use "schedule" and "repeats" to repeat)` };

  const rfc = RFC3339.exec(s);
  if (rfc) return parseRfc3339(rfc, s);

  if (/^\d{4}-/.test(s)) {
    return { ok: false, reason: `"${clip(s)}" is not an RFC 3339 time: write it as "2026-01-02T15:04:05Z", "2026-01-02T15:04:05+02:00" or without offset for local time` };
  }
  if (/^[+-]?(\d|\.\d)/.test(s)) {
    const d = parseDuration(s);
    if (d === undefined) return { ok: false, reason: `"${clip(s)}" is not a duration: use a number with a unit (ns, us, ms, s, m, h), e.g. "1h30m" or "500ms"` };
    if (d < 0) return { ok: false, reason: `"${clip(s)}" is negative; durations count forward from the job's creation` };
    return within(createdAt + d, s);
  }

  if (/^P/i.test(s)) {
    const m = ISO_DURATION.exec(s.toUpperCase());
    if (!m || s.length < 3 || /T$/i.test(s)) return { ok: false, reason: `"${clip(s)}" is not an ISO 8601 duration such as "PT10S" or "P1DT2H"` };
    const [, y, mo, w, d, h, mi, sec] = m;
    const date = new Date(createdAt);
    // calendar parts move the local date (a month is not a fixed number of ms)
    if (y) date.setFullYear(date.getFullYear() + Number(y));
    if (mo) date.setMonth(date.getMonth() + Number(mo));
    if (w) date.setDate(date.getDate() + 7 * Number(w));
    if (d) date.setDate(date.getDate() + Number(d));
    const num = (v?: string) => (v ? Number(v.replace(',', '.')) : 0);
    return within(date.getTime() + num(h) * 3_600_000 + num(mi) * 60_000 + num(sec) * 1000, s);
  }

  return {
    ok: false,
    reason: `"${clip(s)}" is not a time: use RFC 3339 ("2026-01-02T15:04:05Z"), a duration ("30s", "1h30m") or an ISO 8601 duration ("PT30S")`,
  };
}

function parseRfc3339(m: RegExpExecArray, s: string): TimeParse {
  const [, ys, mos, ds, hs, mis, ss, frac, zone] = m;
  const y = Number(ys);
  const mo = Number(mos);
  const d = Number(ds);
  const h = Number(hs);
  const mi = Number(mis);
  const sec = Number(ss);
  if (mo < 1 || mo > 12) return { ok: false, reason: `"${clip(s)}" has month ${mos}; allowed 01-12` };
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (d < 1 || d > days) return { ok: false, reason: `"${clip(s)}" has day ${ds}; ${ys}-${mos} has days 01-${days}` };
  if (h > 23) return { ok: false, reason: `"${clip(s)}" has hour ${hs}; allowed 00-23` };
  if (mi > 59) return { ok: false, reason: `"${clip(s)}" has minute ${mis}; allowed 00-59` };
  if (sec > 59) return { ok: false, reason: `"${clip(s)}" has second ${ss}; allowed 00-59` };
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  let at: number;
  if (!zone) {
    // no offset: the scheduler's local time, as the contract says
    const local = new Date(2000, 0, 1);
    local.setFullYear(y, mo - 1, d);
    local.setHours(h, mi, sec, ms);
    at = local.getTime();
  } else {
    let offsetMin = 0;
    if (zone !== 'Z' && zone !== 'z') {
      const oh = Number(zone.slice(1, 3));
      const om = Number(zone.slice(4, 6));
      if (oh > 23 || om > 59) return { ok: false, reason: `"${clip(s)}" has offset ${zone}; hours 00-23 and minutes 00-59` };
      offsetMin = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
    }
    const utc = new Date(0);
    utc.setUTCFullYear(y, mo - 1, d);
    utc.setUTCHours(h, mi, sec, ms);
    at = utc.getTime() - offsetMin * 60_000;
  }
  return within(at, s);
}

function within(at: number, s: string): TimeParse {
  if (!Number.isFinite(at) || at > LATEST_MS) return { ok: false, reason: `"${clip(s)}" is too far in the future: ${TOO_FAR}` };
  if (at < EARLIEST_MS) return { ok: false, reason: `"${clip(s)}" is before the year 0000` };
  return { ok: true, at: Math.floor(at) };
}

export const TOO_FAR = `every time of a job (dueTime, ttl, each fire of its schedule) must fall before ${LATEST_TEXT}`;

/** Whether an instant (ms since epoch) is one a job may hold: within the bound. */
export function isStorableInstant(at: unknown): at is number {
  return typeof at === 'number' && Number.isFinite(at) && at <= LATEST_MS && at >= EARLIEST_MS;
}

/** Error messages quote user input; keep them short. */
export function clip(s: string, n = 64): string {
  const printable = s.replace(/[\u0000-\u001f\u007f]/g, '?');
  return printable.length > n ? `${printable.slice(0, n)}…` : printable;
}
