/**
 * `node scripts/count-fixed-waits.ts [--all] [folders…]`: counts the fixed waits of 100 ms or more
 * in the test suites (test/ and e2e/ by default) and prints each as file:line, so the figure of
 * issue #39 ("tests on fake time") can be reproduced.
 *
 * A fixed wait is a timer the test's normal path waits for, whatever its form:
 *   - a call of a sleep helper: `sleep(300)`, `delay(WAIT)`, any function a file defines as a
 *     promise around `setTimeout` (`const pause = (ms) => new Promise((r) => setTimeout(r, ms))`);
 *   - `setTimeout(r, 500)` whose callback is a bare function (a promise's resolve, `next`, `done`);
 *   - `setTimeout(() => …, 1000)` whose callback does the test's next step (not a watchdog);
 *   - `setTimeout(400)` / `scheduler.wait(400)` of node:timers/promises.
 * The duration is a literal (`2_000`, `2 * 1000`, `slow ? 100 : 0` takes the largest) or a
 * constant of the same file (`const WAIT = 400`, `const slowMs = Number(process.env.X ?? 1500)`).
 *
 * Not counted, but listed with --all:
 *   - polls: the wait is the interval of a loop that checks a condition (`while (!done() &&
 *     Date.now() < deadline) await sleep(100)`, `for (let i = 0; i < 100 && !ok; i++) …`);
 *   - watchdogs: a timer that only fails or stops what overran (`setTimeout(() => reject(…), ms)`,
 *     `setTimeout(() => proc.kill('SIGKILL'), ms)`, `const t = setTimeout(…)` later cleared, a
 *     timeout in a `Promise.race`);
 *   - waits on a test's ManualClock (`wait(1000, { clock })` in a file that makes one): fake time;
 *   - waits whose duration the file does not say (a parameter: the helper's own definition).
 * Code in template literals (a script a test runs in a child) is scanned like the rest.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const MIN_MS = 100;

export type Kind = 'fixed' | 'poll' | 'watchdog' | 'fake' | 'unknown';
export interface Wait {
  file: string;
  line: number;
  ms: number | undefined;
  kind: Kind;
  text: string;
}

const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else if (SOURCE.test(name)) out.push(path);
  }
  return out;
}

/** The text with comments blanked (same length, newlines kept), so positions still map to lines. */
function withoutComments(src: string): string {
  const out = src.split('');
  let i = 0;
  let quote: string | undefined;
  while (i < src.length) {
    const c = src[i];
    if (quote) {
      if (c === '\\') i += 2;
      else {
        if (c === quote) quote = undefined;
        i++;
      }
    } else if (c === "'" || c === '"') {
      quote = c;
      i++;
    } else if (c === '/' && src[i + 1] === '/' && (i === 0 || /[\s;{}(),]/.test(src[i - 1]))) {
      while (i < src.length && src[i] !== '\n') out[i++] = ' ';
    } else if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? src.length : end + 2;
      for (; i < stop; i++) if (src[i] !== '\n') out[i] = ' ';
    } else i++;
  }
  return out.join('');
}

/** The arguments of the call whose `(` is at `open`, split at top-level commas, and the index after `)`. */
function callArgs(code: string, open: number): { args: string[]; end: number } {
  const args: string[] = [];
  let depth = 0;
  let start = open + 1;
  for (let i = open; i < code.length; i++) {
    const c = code[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) {
        args.push(code.slice(start, i).trim());
        return { args: args.filter((a, n) => a !== '' || n > 0), end: i + 1 };
      }
    } else if (c === ',' && depth === 1) {
      args.push(code.slice(start, i).trim());
      start = i + 1;
    }
  }
  return { args, end: code.length };
}

const NUMBER = /^\d[\d_]*(\.\d+)?$/;

/** The duration an expression says, in ms: a literal, a product, a constant of the file; the largest of a choice. */
function durationOf(expr: string, constants: Map<string, number>): number | undefined {
  const e = expr.trim().replace(/^\((.*)\)$/s, '$1').trim();
  if (NUMBER.test(e)) return Number(e.replaceAll('_', ''));
  if (/^[A-Za-z_$][\w$]*$/.test(e)) return constants.get(e);
  if (/^[\w$\s.]+(\*[\w$\s.]+)+$/.test(e)) {
    const product = e.split('*').map((p) => durationOf(p, constants));
    if (product.every((p) => p !== undefined)) return product.reduce((a, b) => a! * b!, 1);
  }
  // a choice or a fallback (`slow ? 100 : 0`, `Number(process.env.X ?? 1500)`): the largest number it names
  const found = [...e.matchAll(/\b\d[\d_]*\b/g)].map((m) => Number(m[0].replaceAll('_', '')));
  const named = [...e.matchAll(/\b[A-Za-z_$][\w$]*\b/g)].map((m) => constants.get(m[0])).filter((n) => n !== undefined);
  const all = [...found, ...named];
  return all.length ? Math.max(...all) : undefined;
}

/** `const NAME = <duration>` in the file. */
function constantsOf(code: string): Map<string, number> {
  const constants = new Map<string, number>();
  for (const m of code.matchAll(/\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::\s*number\s*)?=\s*([^;\n]+)/g)) {
    const value = durationOf(m[2], constants);
    if (value !== undefined && !/[`'"]/.test(m[2]) && !/=>/.test(m[2])) constants.set(m[1], value);
  }
  return constants;
}

/** The parameters of a parameter list's text: `(method: string, ms = 300, body?: boolean)` → method, ms, body. */
function paramNames(list: string): string[] {
  return callArgs(`(${list})`, 0).args.map((p) => /^\s*(?:\.\.\.)?([A-Za-z_$][\w$]*)/.exec(p)?.[1] ?? '');
}

/** The function whose body holds `at`, if it has a name: its name and parameters. */
function enclosingFunction(code: string, at: number): { name: string; params: string[] } | undefined {
  const defs = /(?:\b(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?\(([^()]*)\)[^=;]*=>|\bfunction\s+([A-Za-z_$][\w$]*)\s*\(([^()]*)\))/g;
  let found: { name: string; params: string[] } | undefined;
  for (const m of code.slice(0, at).matchAll(defs)) found = { name: m[1] ?? m[3], params: paramNames(m[2] ?? m[4]) };
  return found;
}
/** The wait at `at` is the interval of a loop that checks a condition (a poll)? */
function inConditionLoop(code: string, at: number): boolean {
  // a loop of one statement: `while (…) await sleep(…)`, `for (…; …; …) await …`
  const lineStart = code.lastIndexOf('\n', at) + 1;
  for (const m of code.slice(lineStart, at).matchAll(/\b(while|for)\s*\(/g)) {
    const open = lineStart + m.index + m[0].length - 1;
    const { end } = callArgs(code, open);
    if (/^\s*(await\s+)?$/.test(code.slice(end, at))) return loopHeadIsCondition(m[1], code.slice(open + 1, end - 1));
  }
  // the block around it: a loop's, or an if/else/try/catch inside a loop's
  let depth = 0;
  for (let i = at; i >= 0; i--) {
    const c = code[i];
    if (c === '}') depth++;
    else if (c === '{') {
      if (depth > 0) {
        depth--;
        continue;
      }
      const before = code.slice(0, i).trimEnd();
      if (/\b(do|else|try|finally|catch)$/.test(before)) {
        if (before.endsWith('do')) return true;
        continue;
      }
      if (!before.endsWith(')')) return false; // a function's body, an object
      const open = openingParen(before, before.length - 1);
      const word = /([A-Za-z_$][\w$]*)\s*$/.exec(before.slice(0, open))?.[1];
      if (word === 'while' || word === 'for') return loopHeadIsCondition(word, before.slice(open + 1, -1));
      if (word === 'if' || word === 'catch') continue;
      return false;
    }
  }
  return false;
}

/** The index of the `(` that the `)` at `close` ends. */
function openingParen(text: string, close: number): number {
  let depth = 0;
  for (let i = close; i >= 0; i--) {
    if (text[i] === ')') depth++;
    else if (text[i] === '(' && --depth === 0) return i;
  }
  return 0;
}

function loopHeadIsCondition(word: string, head: string): boolean {
  if (word === 'while') return true;
  const parts = head.split(';');
  if (parts.length < 3) return false; // for … of / in
  // a plain count (`i < 5`) repeats a fixed wait; `for (;;)` ends on a condition, and so do the others
  return !/^\s*[\w$]+\s*<=?\s*[\w$.]+\s*$/.test(parts[1]);
}

/** A timer that only fails or stops what overran, or one the file clears. */
function isWatchdog(code: string, at: number, callback: string): boolean {
  // a bound raced against what is awaited (`Promise.race([done, timeout])`): it wins only on failure
  if (/Promise\.race\(\s*\[[^;]*$/.test(code.slice(Math.max(0, at - 200), at))) return true;
  const assigned = /(?:const|let|var)?\s*([A-Za-z_$][\w$.]*)\s*=\s*$/.exec(code.slice(Math.max(0, at - 80), at));
  if (assigned && new RegExp(`clearTimeout\\(\\s*${assigned[1].replace(/[.$]/g, '\\$&')}\\s*\\)`).test(code)) return true;
  if (!/=>/.test(callback)) return false;
  if (/\breject\s*\(|\.kill\s*\(|\bthrow\b/.test(callback)) return true;
  // only stops a socket or request (no resolve, no next step): the normal path ends before it fires
  return /\.(destroy|abort|close)\s*\(/.test(callback) && !/\bresolve\s*\(|\bdone\s*\(|\bnext\s*\(/.test(callback);
}

export function waitsIn(file: string, src: string): Wait[] {
  const code = withoutComments(src);
  const lines = src.split('\n');
  const lineAt = (pos: number): number => code.slice(0, pos).split('\n').length;
  const constants = constantsOf(code);
  // name → which argument is the duration: the usual names, node:timers/promises' setTimeout under
  // another name, and every function of the file that passes one of its parameters to setTimeout
  const helpers = new Map<string, number>(['sleep', 'delay', 'wait', 'pause'].map((n) => [n, 0]));
  for (const m of code.matchAll(/\bsetTimeout\s+as\s+([A-Za-z_$][\w$]*)/g)) helpers.set(m[1], 0);
  const waits: Wait[] = [];
  const add = (pos: number, ms: number | undefined, kind: Kind): void => {
    const line = lineAt(pos);
    const text = lines[line - 1].trim();
    if (kind !== 'watchdog' && ms === undefined) waits.push({ file, line, ms, kind: 'unknown', text });
    else if (ms !== undefined && ms >= MIN_MS) waits.push({ file, line, ms, kind: kind === 'fixed' && inConditionLoop(code, pos) ? 'poll' : kind, text });
  };
  const timers = [...code.matchAll(/(?<![.\w$])setTimeout\s*\(/g)].map((m) => ({ pos: m.index, ...callArgs(code, m.index + m[0].length - 1) }));
  for (const { pos, args } of timers) {
    if (args.length === 1) {
      add(pos, durationOf(args[0], constants), 'fixed'); // node:timers/promises
      continue;
    }
    if (args.length < 2) continue;
    const ms = durationOf(args[1], constants);
    const watchdog = isWatchdog(code, pos, args[0]);
    const fn = ms === undefined && !watchdog ? enclosingFunction(code, pos) : undefined;
    const param = fn ? fn.params.indexOf(args[1]) : -1;
    if (fn && param >= 0) helpers.set(fn.name, param); // its calls are the waits
    else add(pos, ms, watchdog ? 'watchdog' : 'fixed');
  }
  const isDefinition = (pos: number): boolean => /\bfunction\s*$|\b(?:const|let)\s*$/.test(code.slice(Math.max(0, pos - 20), pos));
  for (const m of code.matchAll(/(?<![.\w$])([A-Za-z_$][\w$]*)\s*\(|\bscheduler\.wait\s*\(/g)) {
    const index = m[1] === undefined ? 0 : helpers.get(m[1]);
    if (index === undefined || isDefinition(m.index)) continue;
    const { args } = callArgs(code, m.index + m[0].length - 1);
    if (args[index] === undefined) continue;
    const ms = durationOf(args[index], constants);
    // a usual name called with something that is not a duration (`wait(port)`) is another function
    if (ms === undefined && m[1] !== undefined && ['sleep', 'delay', 'wait', 'pause'].includes(m[1])) continue;
    if (ms === undefined && enclosingFunction(code, m.index)?.params.includes(args[index])) continue; // a helper of a helper
    const onManualClock = /\bManualClock\b/.test(code) && args.some((a, i) => i !== index && /\bclock\b/.test(a));
    add(m.index, ms, onManualClock ? 'fake' : 'fixed');
  }
  return waits.sort((a, b) => a.line - b.line);
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const all = argv.includes('--all');
  const roots = argv.filter((a) => !a.startsWith('--'));
  const files = (roots.length ? roots : ['test', 'e2e']).flatMap((r) => {
    const path = resolve(ROOT, r);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
  const waits = files.sort().flatMap((f) => waitsIn(relative(ROOT, f), readFileSync(f, 'utf8')));
  const show = (kind: Kind, title: string): void => {
    const of = waits.filter((w) => w.kind === kind);
    console.log(`${title}: ${of.length}`);
    for (const w of of) console.log(`  ${w.file}:${w.line}  ${w.ms ?? '?'} ms  ${w.text}`);
  };
  show('fixed', `fixed waits of ${MIN_MS} ms or more`);
  if (all) {
    show('poll', 'polls (a wait between checks of a condition, not counted)');
    show('watchdog', 'watchdogs (a timer that fails or stops what overran, not counted)');
    show('fake', 'waits on a ManualClock (fake time, not counted)');
    show('unknown', 'waits of a duration the file does not say (not counted)');
  }
}
