/**
 * V8 settings for a sidecar-sized process, applied before anything else loads (cli/rt.ts imports
 * this module first). Without them the young generation grows during the allocation burst of
 * start-up (and to 128 MB under load) and keeps the pages: 8 MB of idle RSS on the bundle, 70–130
 * MB under load. `--semi-space-growth-factor=1` keeps it at its initial size; unlike
 * `--max-semi-space-size` it takes effect when set at run time, so no re-exec is needed.
 * `--heap-growing-percent=70` lets the old generation grow by 70% of what a full GC kept, where
 * V8's own factor goes up to 4×: with 256 workflows in flight the sidecar holds 130–135 MB
 * instead of 170–205 MB, for no CPU per workflow that alternating runs could tell apart (40%
 * saved 6 MB more and cost 5–15% CPU).
 * Once start-up is over, cli/memory-reducer.ts lets the young generation grow under load and gives
 * the memory back when the process is calm again.
 * Measured in bench/startup.bench.ts and bench/jobs.bench.ts (bench/README.md, ### startup and
 * ### jobs, with the trade-offs); `RT_V8_FLAGS` replaces the default (empty = V8's own) and turns
 * the reducer off.
 */
import { setFlagsFromString } from 'node:v8';
import { startMemoryReducer } from './memory-reducer.ts';

export const DEFAULT_V8_FLAGS = '--semi-space-growth-factor=1 --heap-growing-percent=70';

const flags = process.env.RT_V8_FLAGS ?? DEFAULT_V8_FLAGS;
if (flags.trim()) setFlagsFromString(flags);
if (process.env.RT_V8_FLAGS === undefined) startMemoryReducer();
