/**
 * A circuit breaker's `trip` condition: the CEL-like expression the reference runtime's
 * Resiliency resources write (`consecutiveFailures > 5`), over the breaker's counts of its current
 * generation. rt reads the subset those resources use: comparisons (`> >= < <= == !=`) of a count
 * and a whole number, joined by `&&` and `||`, with parentheses. Anything else is refused when the
 * resource is read, never when a call fails.
 */

/** What a closed breaker has counted since its last reset (gobreaker's Counts). */
export interface Counts {
  requests: number;
  totalSuccesses: number;
  totalFailures: number;
  consecutiveSuccesses: number;
  consecutiveFailures: number;
}

export type TripCondition = (c: Counts) => boolean;

const COUNTS = new Set<keyof Counts>(['requests', 'totalSuccesses', 'totalFailures', 'consecutiveSuccesses', 'consecutiveFailures']);
const TOKEN = /\s*(\d+|[A-Za-z_][A-Za-z0-9_]*|>=|<=|==|!=|&&|\|\||[<>()])/y;

export class TripError extends Error {}

function tokenize(text: string): string[] {
  const out: string[] = [];
  TOKEN.lastIndex = 0;
  let pos = 0;
  while (pos < text.length) {
    if (/^\s*$/.test(text.slice(pos))) break;
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(text);
    if (!m) throw new TripError(`cannot read "${text.slice(pos).trim()}"`);
    out.push(m[1]);
    pos = TOKEN.lastIndex;
  }
  return out;
}

/** Parses a trip expression into a predicate; throws TripError naming what it could not read. */
export function parseTrip(text: string): TripCondition {
  const tokens = tokenize(text);
  if (tokens.length === 0) throw new TripError('is empty');
  let i = 0;
  const peek = () => tokens[i];
  const take = (what: string): string => {
    const t = tokens[i++];
    if (t === undefined) throw new TripError(`ends where ${what} was expected`);
    return t;
  };
  const operand = (): ((c: Counts) => number) => {
    const t = take('a count or a number');
    if (/^\d+$/.test(t)) {
      const n = Number(t);
      return () => n;
    }
    if (COUNTS.has(t as keyof Counts)) return (c) => c[t as keyof Counts];
    throw new TripError(`"${t}" is not one of ${[...COUNTS].join(', ')} or a whole number`);
  };
  const comparison = (): TripCondition => {
    if (peek() === '(') {
      i++;
      const inner = or();
      if (take('")"') !== ')') throw new TripError('a "(" is not closed');
      return inner;
    }
    const left = operand();
    const op = take('a comparison (>, >=, <, <=, ==, !=)');
    const right = operand();
    switch (op) {
      case '>': return (c) => left(c) > right(c);
      case '>=': return (c) => left(c) >= right(c);
      case '<': return (c) => left(c) < right(c);
      case '<=': return (c) => left(c) <= right(c);
      case '==': return (c) => left(c) === right(c);
      case '!=': return (c) => left(c) !== right(c);
      default: throw new TripError(`"${op}" is not a comparison (>, >=, <, <=, ==, !=)`);
    }
  };
  const and = (): TripCondition => {
    let f = comparison();
    while (peek() === '&&') {
      i++;
      const [a, b] = [f, comparison()];
      f = (c) => a(c) && b(c);
    }
    return f;
  };
  const or = (): TripCondition => {
    let f = and();
    while (peek() === '||') {
      i++;
      const [a, b] = [f, and()];
      f = (c) => a(c) || b(c);
    }
    return f;
  };
  const cond = or();
  if (i < tokens.length) throw new TripError(`unexpected "${tokens[i]}"`);
  return cond;
}
