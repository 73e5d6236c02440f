/**
 * cli/memory-reducer.ts in a process of its own: the young generation may grow once start-up is
 * over, a busy event loop keeps it, and a calm one gets it back (a memory-reducing GC).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const MODULE = pathToFileURL(join(import.meta.dirname, '..', '..', 'cli', 'memory-reducer.ts')).href;

// tickMs 100: "calm for 3 ticks" is 0.3 s here instead of 3 s
const SCRIPT = `
import v8 from 'node:v8';
// as cli/v8-flags.ts starts, before the module loads (loading it could grow the young generation)
v8.setFlagsFromString('--semi-space-growth-factor=1');
const { startMemoryReducer } = await import(${JSON.stringify(MODULE)});
const MB = 1048576;
const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / MB;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const reductions = [];
startMemoryReducer({ tickMs: 100, calmTicks: 3, grownBytes: 4 * MB, minGapMs: 0, onReduce: (before, after) => reductions.push({ before: before / MB, after: after / MB }) });
// a burst of objects that live a while, as requests in flight do
function burst() {
  let ring = new Array(100000);
  for (let i = 0; i < 4e6; i++) ring[i % ring.length] = { i, s: 'x' + i };
  ring = null;
}
burst(); // during start-up: growth is off
const atStart = young();
await sleep(250); // the first calm tick: start-up is over
burst();
const grown = young();
// busy: 9 ms of work every 10 ms for 1 s keeps the loop ~90% used
const busyUntil = Date.now() + 1000;
while (Date.now() < busyUntil) {
  const t = Date.now();
  while (Date.now() - t < 9) JSON.stringify({ a: [1, 2, 3] });
  await sleep(1);
}
const whileBusy = { young: young(), reductions: reductions.length };
await sleep(1200); // calm
console.log(JSON.stringify({ atStart, grown, whileBusy, after: young(), reductions }));
`;

describe('the memory reducer', () => {
  it('lets the young generation grow after start-up, keeps it while busy and gives it back when calm', () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      atStart: number;
      grown: number;
      whileBusy: { young: number; reductions: number };
      after: number;
      reductions: { before: number; after: number }[];
    };
    expect(got.atStart).toBeLessThanOrEqual(4);
    expect(got.grown).toBeGreaterThanOrEqual(8);
    expect(got.whileBusy.reductions).toBe(0);
    expect(got.whileBusy.young).toBeGreaterThanOrEqual(8);
    expect(got.reductions.length).toBeGreaterThanOrEqual(1);
    expect(got.reductions[0].after).toBeLessThan(got.reductions[0].before - 4);
    expect(got.after).toBeLessThanOrEqual(2);
  });
});
