/**
 * V8 settings for a sidecar-sized process, applied by cli/rt.ts before any other module is
 * resolved. This module has no imports, so the build keeps it inside the entry file: resolving and
 * loading the chunks runs Node's path and URL functions hot enough for Maglev to compile them, and
 * once it has, the compiler's code and zones stay in an idle sidecar's RSS (3 MB; bench/README.md
 * `### startup`).
 *
 * - The young generation stays at its initial 1 MB through start-up (`--semi-space-growth-factor=1`;
 *   unlike `--max-semi-space-size` it takes effect when set at run time, so no re-exec is needed).
 *   Without it, it grows during the allocation burst of start-up and keeps the pages: 8 MB of idle
 *   RSS on the bundle.
 * - V8's optimizing compilers (Maglev, TurboFan) are off through start-up; the interpreter and
 *   Sparkplug run it as fast.
 * - `--heap-growing-percent=70` lets the old generation grow by 70% of what a full GC kept, where
 *   V8's own factor goes up to 4×: with 256 workflows in flight the sidecar holds 130–135 MB
 *   instead of 170–205 MB, for no CPU per workflow that alternating runs could tell apart (40%
 *   saved 6 MB more and cost 5–15% CPU).
 *
 * Once start-up is over, cli/memory-reducer.ts sets SETTLED_V8_FLAGS (V8's own values back), lets
 * the young generation grow under load and gives the memory back when the process is calm again.
 * Measured in bench/startup.bench.ts and bench/jobs.bench.ts (bench/README.md, ### startup and
 * ### jobs, with the trade-offs); `RT_V8_FLAGS` replaces the default (empty = V8's own) and turns
 * the reducer off.
 */

/** Start-up only. */
export const STARTUP_V8_FLAGS = '--semi-space-growth-factor=1 --no-maglev --no-turbofan';
/** V8's own values of what STARTUP_V8_FLAGS changes. */
export const SETTLED_V8_FLAGS = '--semi-space-growth-factor=2 --maglev --turbofan';
export const DEFAULT_V8_FLAGS = `--heap-growing-percent=70 ${STARTUP_V8_FLAGS}`;

/**
 * Node's built-in modules that an `rt` command loads while it starts, loaded before the flags are
 * set. Node compiles its built-ins from a code cache made under V8's default flags, and V8 rejects
 * that cache once any flag differs: set first, the flags above had ~55 of them compiled from source
 * at every start. Loaded here, they come from the cache, a few milliseconds before they would load
 * anyway (`listen()` loads cluster, and with it child_process and dgram).
 *
 * The list stops short of what would make V8 optimize Node's own `requireBuiltin` while it runs
 * (with Maglev: the compiler's pages, 2 MB of idle RSS, stay mapped): the optimizing compilers are
 * still on here. A few small ones (dns, parseArgs, fs.Dir, util.diff) are left to compile from
 * source after the flags for that reason. test/build/bundle.test.ts checks both: no optimized
 * function while it starts, and which built-ins are compiled from source. Measured in
 * bench/README.md `### startup` (2026-11-26, fifth session).
 */
const STARTUP_BUILTINS = ['node:http', 'node:cluster', 'node:stream/promises', 'node:string_decoder', 'node:os', 'node:worker_threads', 'node:perf_hooks', 'node:timers/promises', 'node:assert', 'node:vm', 'node:sqlite'];

/** Sets RT_V8_FLAGS, or the default; whether the memory reducer is to run (not with RT_V8_FLAGS). */
export function applyV8Flags(): boolean {
  const flags = process.env.RT_V8_FLAGS ?? DEFAULT_V8_FLAGS;
  if (flags.trim()) {
    for (const id of STARTUP_BUILTINS) process.getBuiltinModule(id);
    process.getBuiltinModule('node:v8').setFlagsFromString(flags);
  }
  return process.env.RT_V8_FLAGS === undefined;
}
