/**
 * Go-style durations ("1h30m", "500ms", "1.5s", "2h45m30.5s"), as the ecosystem writes them
 * in component metadata, job dueTime/ttl and health options. Returns milliseconds.
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3,
  'μs': 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Parses a Go duration; returns undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  let s = text.trim();
  let sign = 1;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') return undefined;
  let total = 0;
  PART.lastIndex = 0;
  let pos = 0;
  while (pos < s.length) {
    PART.lastIndex = pos;
    const m = PART.exec(s);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]];
    pos = PART.lastIndex;
  }
  return Number.isFinite(total) ? sign * total : undefined;
}

/** Formats milliseconds as a Go duration string (e.g. 5000 → "5s", 90000 → "1m30s"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(ms);
  let out = '';
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  if (h) out += `${h}h`;
  if (h || m) out += `${m}m`;
  if (rest || !out) {
    if (!h && !m && rest < 1000) out += `${+rest.toFixed(3)}ms`;
    else out += `${+(rest / 1000).toFixed(3)}s`;
  }
  return (neg ? '-' : '') + out;
}
