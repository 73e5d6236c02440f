/**
 * cli/memory-reducer.ts in a process of its own: the young generation may grow once start-up is
 * over, a busy event loop keeps it, and a calm one gets it back (a memory-reducing GC); V8's
 * optimizing compilers are off during start-up and on after it, also in a process busy from the start.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const MODULE = pathToFileURL(join(import.meta.dirname, '..', '..', 'cli', 'memory-reducer.ts')).href;
const FLAGS = pathToFileURL(join(import.meta.dirname, '..', '..', 'cli', 'v8-flags.ts')).href;

// cli/v8-flags.ts's start-up flags, set as cli/rt.ts sets them: before the reducer's module loads
// (loading it could grow the young generation)
const PRELUDE = `
import v8 from 'node:v8';
const { STARTUP_V8_FLAGS, SETTLED_V8_FLAGS } = await import(${JSON.stringify(FLAGS)});
v8.setFlagsFromString(STARTUP_V8_FLAGS);
const { startMemoryReducer, startupOver } = await import(${JSON.stringify(MODULE)});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// waits (calm: a look every 10 ms) until cond() holds; fails after 10 s
const until = async (cond, what) => {
  for (const end = Date.now() + 10000; !cond(); await sleep(10)) if (Date.now() > end) throw new Error('timed out waiting for ' + what);
};
// whether V8 runs a hot function as optimized code (Maglev or TurboFan): bit 16 of its status;
// its caller stays interpreted, so that hot is not inlined into the caller's optimized code
function hot(x) { return (x * 31 + 7) % 1009; }
function warm() { let s = 0; for (let i = 0; i < 300000; i++) s += hot(i); return s; }
%NeverOptimizeFunction(warm);
const optimized = () => (%GetOptimizationStatus(hot) & 16) !== 0;
`;

// tickMs 100: "calm for 3 ticks" is 0.3 s here instead of 3 s
const SCRIPT = `${PRELUDE}
const MB = 1048576;
const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / MB;
const reductions = [];
let settled = false;
startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS, tickMs: 100, settleTickMs: 100, calmTicks: 3, grownBytes: 4 * MB, minGapMs: 0, onReduce: (before, after) => reductions.push({ before: before / MB, after: after / MB }), onSettled: () => (settled = true) });
// a burst of objects that live a while, as requests in flight do
function burst() {
  let ring = new Array(100000);
  for (let i = 0; i < 4e6; i++) ring[i % ring.length] = { i, s: 'x' + i };
  ring = null;
}
burst(); // during start-up: growth is off, and so are the optimizing compilers
warm();
const atStart = { young: young(), optimized: optimized() };
await until(() => settled, 'the end of start-up'); // the first calm tick
burst();
// the optimizing compilers are on now; they compile on a thread of their own, which a machine
// busy with other work may run late: warm up until the hot function runs optimized (or 10 s)
let optimizedAfter = false;
for (const end = Date.now() + 10000; !(optimizedAfter = optimized()) && Date.now() < end; await sleep(1)) warm();
const grown = young();
// busy: 9 ms of work every 10 ms for 1 s keeps the loop ~90% used
const busyUntil = Date.now() + 1000;
while (Date.now() < busyUntil) {
  const t = Date.now();
  while (Date.now() - t < 9) JSON.stringify({ a: [1, 2, 3] });
  await sleep(1);
}
const whileBusy = { young: young(), reductions: reductions.length };
await until(() => reductions.length > 0, 'a reduction once calm'); // calm for 3 ticks
console.log(JSON.stringify({ atStart, optimizedAfter, grown, whileBusy, after: young(), reductions }));
`;

// busy from the start: start-up is over when the command says so (startupOver, at 300 ms here),
// or else after settleMs all the same. Samples are taken until the hot function has run optimized
// for 10 samples (at most 15 s): the optimizing compilers work on a thread of their own, which a
// machine busy with other work runs late, so what is checked is the order of events (before the
// switch: never optimized; after it: optimized, and then for good), not how soon after it
const busyScript = (sayWhen: boolean) => `${PRELUDE}
const samples = [];
let switchedAt = -1;
startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS, settleTickMs: 50, settleMs: ${sayWhen ? 60_000 : 400}, onSettled: () => (switchedAt = samples.length) });
const start = Date.now();
let said = false;
let optimizedFor = 0;
while (Date.now() - start < 15000 && optimizedFor < 10) {
  const t = Date.now();
  while (Date.now() - t < 20) warm();
  if (${sayWhen} && !said && Date.now() - start >= 300) { said = true; switchedAt = samples.length; startupOver(); }
  const s = { ms: Date.now() - start, optimized: optimized() };
  samples.push(s);
  optimizedFor = s.optimized ? optimizedFor + 1 : 0;
  await new Promise((r) => setImmediate(r));
}
console.log(JSON.stringify({ samples, switchedAt }));
`;

/** Before the switch never optimized; after it optimized, and once optimized, for good. */
function checkSwitch(got: { samples: { ms: number; optimized: boolean }[]; switchedAt: number }, notBeforeMs: number): void {
  const { samples, switchedAt } = got;
  expect(switchedAt, JSON.stringify(samples)).toBeGreaterThan(0);
  expect(samples[switchedAt].ms).toBeGreaterThanOrEqual(notBeforeMs);
  expect(samples.slice(0, switchedAt).some((s) => s.optimized)).toBe(false);
  const first = samples.findIndex((s) => s.optimized);
  expect(first, JSON.stringify(samples)).toBeGreaterThanOrEqual(switchedAt);
  expect(samples.slice(first).every((s) => s.optimized)).toBe(true);
  expect(samples.length - first).toBeGreaterThanOrEqual(10);
}

// start-up compiles many functions that run once (configuration, routes); the reduction at the end
// of start-up flushes their bytecode, and a function called again compiles again and still works
const FLUSH_SCRIPT = `${PRELUDE}
const bytecode = () => v8.getHeapCodeStatistics().bytecode_and_metadata_size;
const base = bytecode();
const fns = [];
for (let i = 0; i < 2000; i++) fns.push(new Function('a', 'b', \`let s = a + \${i}; for (let j = 0; j < b; j++) s = (s * 31 + j) % 1000003; return { i: \${i}, s, t: [s, a, b].join(':') };\`));
let sum = 0;
for (const f of fns) sum += f(1, 3).s;
const compiled = bytecode();
let settled = false;
startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS, settleTickMs: 100, onSettled: () => (settled = true) });
await until(() => settled, 'the end of start-up'); // calm: start-up is over and its one reduction ran
const flushed = bytecode();
let again = 0;
for (const f of fns) again += f(1, 3).s;
console.log(JSON.stringify({ base, compiled, flushed, same: again === sum }));
`;

// calm from the start (waiting, as a sidecar waits on a component's connection): with
// untilStartupOver, start-up ends when the command says so (at 500 ms here), not at the first calm tick
const calmScript = (untilStartupOver: boolean) => `${PRELUDE}
const start = Date.now();
let settledAt = -1;
startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS, settleTickMs: 50, settleMs: 60_000, untilStartupOver: ${untilStartupOver}, onSettled: () => (settledAt = Date.now() - start) });
await sleep(500);
const before = settledAt;
startupOver();
await until(() => settledAt >= 0, 'the end of start-up');
console.log(JSON.stringify({ before, settledAt }));
`;

const run = (script: string) => {
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 80_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as unknown;
};

// the scripts do seconds of work; on cores busy with other work (the suite must pass the same beside
// a CPU-bound load) they take several times as long
describe('the memory reducer', { timeout: 90_000 }, () => {
  it('lets the young generation grow and the optimizing compilers run after start-up, keeps it while busy and gives it back when calm', () => {
    const got = run(SCRIPT) as {
      atStart: { young: number; optimized: boolean };
      optimizedAfter: boolean;
      grown: number;
      whileBusy: { young: number; reductions: number };
      after: number;
      reductions: { before: number; after: number }[];
    };
    expect(got.atStart.young).toBeLessThanOrEqual(4);
    expect(got.atStart.optimized).toBe(false);
    expect(got.optimizedAfter).toBe(true);
    expect(got.grown).toBeGreaterThanOrEqual(8);
    expect(got.whileBusy.reductions).toBe(0);
    expect(got.whileBusy.young).toBeGreaterThanOrEqual(8);
    expect(got.reductions.length).toBeGreaterThanOrEqual(1);
    expect(got.reductions[0].after).toBeLessThan(got.reductions[0].before - 4);
    expect(got.after).toBeLessThanOrEqual(2);
  });

  it('flushes the bytecode of what start-up ran once, when start-up is over; those functions compile again when called', () => {
    const got = run(FLUSH_SCRIPT) as { base: number; compiled: number; flushed: number; same: boolean };
    const made = got.compiled - got.base;
    expect(made).toBeGreaterThan(200_000);
    expect(got.flushed).toBeLessThan(got.compiled - made * 0.8);
    expect(got.same).toBe(true);
  });

  it("releases the compile cache's in-memory entries when start-up is over (Node holds each module's code cache until then)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-reducer-cache-'));
    try {
      const script = `import { enableCompileCache } from 'node:module';
        enableCompileCache(${JSON.stringify(dir)});
        const { startMemoryReducer } = await import(${JSON.stringify(MODULE)});
        let settled;
        const over = new Promise((r) => (settled = r));
        startMemoryReducer({ settleTickMs: 100, onSettled: () => settled() });
        console.error('-- waiting');
        const t = setTimeout(() => { console.error('start-up never ended'); process.exit(1); }, 10000);
        await over;
        clearTimeout(t);`;
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } });
      expect(r.status, r.stderr).toBe(0);
      const [before, after] = r.stderr.split('-- waiting');
      expect(before).not.toContain('flushCompileCache');
      expect(after).toContain('module.flushCompileCache() requested');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('switches the optimizing compilers on when the command says start-up is over, in a process busy from the start', () => {
    checkSwitch(run(busyScript(true)) as Parameters<typeof checkSwitch>[0], 300);
  });

  it('with untilStartupOver (rt sidecar, rt run), a calm moment before the command says it is ready does not end start-up', () => {
    const told = run(calmScript(true)) as { before: number; settledAt: number };
    expect(told.before).toBe(-1);
    expect(told.settledAt).toBeGreaterThanOrEqual(500);
    // without it, the first calm tick ends start-up
    const calm = run(calmScript(false)) as { before: number; settledAt: number };
    expect(calm.before).toBeGreaterThanOrEqual(0);
    expect(calm.before).toBeLessThan(500);
  });

  it('switches them on after settleMs when nothing says so and the process is never calm', () => {
    checkSwitch(run(busyScript(false)) as Parameters<typeof checkSwitch>[0], 395);
  });
});
