/**
 * Lets V8's young generation grow while the process is busy and gives the memory back when it is
 * calm again. A busy sidecar (a burst of job triggers, pluggable calls) spends a third of its CPU
 * in scavenges of a 1 MB young generation; grown, the same burst runs ~1.4× faster, but V8 never
 * shrinks it again on its own: its memory reducer judges the allocation rate from the last GC,
 * and an idle process has none, so a sidecar that once took a burst kept 150+ MB more for good
 * (bench/README.md, ### jobs).
 *
 * So: cli/v8-flags.ts starts with `--semi-space-growth-factor=1`, which keeps start-up from
 * growing it, and with V8's optimizing compilers off. Once start-up is over (the command says so,
 * startupOver(); or, unless the command said it would (untilStartupOver), the event loop is calm for
 * the first time; at the latest after settleMs),
 * settledFlags are set (the growth factor and the compilers as V8 has them, SETTLED_V8_FLAGS of
 * cli/v8-flags.ts) and, at the first calm moment, memory-reducing GCs give back what start-up
 * left, its bytecode included (4–5 MB of an idle sidecar's RSS, bench/README.md `### startup`),
 * and Node's in-memory copy of the compile cache (cli/compile-cache.ts) is released.
 * Then, each time the loop has been calm for calmTicks seconds while the committed heap is
 * grownBytes above what it was after the last reduction, one memory-reducing full GC (V8's "last
 * resort" collection: shrinks the young generation and returns its pages) runs, at most every
 * minGapMs (DEFAULTS below); it takes 20–70 ms, and only when calm. Calm = the event loop was
 * busy for less than calmLoop of the time that passed (its utilization, from the global
 * `performance`, which needs no import): 1,000 job triggers/s keep a sidecar's loop ~10% busy, a
 * burst near 100%. Not the process's CPU share: on a machine whose cores are busy with other work a
 * busy process gets a small share and looked calm, while a busy loop stays busy however little CPU
 * it is given.
 *
 * The GC function comes from a context made with `--expose-gc` on (Node's `vm`), created on the
 * first reduction only; the main context never gets a global `gc`.
 */
import { flushCompileCache } from 'node:module';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface ReducerOptions {
  tickMs: number;
  /** How often start-up's end is looked for, and the latest it is taken to be over. */
  settleTickMs: number;
  settleMs: number;
  /** V8 flags set once start-up is over (cli/v8-flags.ts SETTLED_V8_FLAGS); none by default. */
  settledFlags?: string;
  /**
   * The command calls startupOver() when it is ready (`rt sidecar`, `rt run`): a calm moment before
   * that does not end start-up, only settleMs does. The flags are part of what V8 checks before it
   * takes a module's compile cache: a component's chunk compiled before the switch in one start and
   * after it in the next is rejected and compiled again (a sidecar waiting on a component's
   * connection looks calm, and when it does is a matter of timing).
   */
  untilStartupOver?: boolean;
  /** Event loop utilization (busy time over wall time) below which a window counts as calm. */
  calmLoop: number;
  calmTicks: number;
  grownBytes: number;
  minGapMs: number;
  /** Called after each reduction (tests, debug logs). */
  onReduce?: (before: number, after: number) => void;
  /** Called once start-up is over, after the reduction that ends it when there is one (tests). */
  onSettled?: () => void;
}

export const DEFAULTS: ReducerOptions = {
  tickMs: 1000,
  settleTickMs: 250,
  settleMs: 2000,
  calmLoop: 0.25,
  calmTicks: 3,
  grownBytes: 16 * 1024 * 1024,
  minGapMs: 10_000,
};

type GcFn = (opts: { type: 'major'; execution?: 'sync' | 'async'; flavor: 'last-resort' }) => void;
let gcFn: GcFn | undefined;

/** V8's gc() with options, from a fresh context; --expose-gc is on only while it is made. */
function gc(): GcFn {
  if (!gcFn) {
    setFlagsFromString('--expose-gc');
    try {
      gcFn = runInNewContext('gc') as GcFn;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  return gcFn;
}

/** A memory-reducing full GC now (shrinks the young generation, releases pooled pages). */
export function reduceMemory(): void {
  gc()({ type: 'major', flavor: 'last-resort' });
}

/**
 * The reduction once start-up is over: two GCs back to back with V8's bytecode age at 1, which
 * flushes the bytecode of every function (nothing runs between them). What start-up ran once
 * (reading the configuration, building the routes and the component registry) would otherwise stay
 * until V8's six full GCs of not being run, which an idle sidecar never reaches; what runs again is
 * compiled again from its source at its next call. 0.9 MB of an idle sidecar's RSS, for ~8 ms more
 * on the first request afterwards (bench/README.md `### startup`).
 */
export function reduceStartupMemory(): void {
  setFlagsFromString('--bytecode-old-age=1');
  try {
    reduceMemory();
    reduceMemory();
  } finally {
    setFlagsFromString(`--bytecode-old-age=${V8_BYTECODE_OLD_AGE}`);
  }
}
/** V8's own (`node --v8-options`). */
const V8_BYTECODE_OLD_AGE = 6;

/**
 * The event loop's utilization since the last call (each caller keeps its own window). A window
 * with nothing measured yet (the loop has not started) counts as busy: start-up is not over.
 */
function loopShare(): () => number {
  const elu = performance.eventLoopUtilization;
  let last = elu();
  return () => {
    const now = elu();
    const share = elu(now, last).utilization;
    last = now;
    return Number.isFinite(share) ? share : 1;
  };
}

let settleRunning: (() => void) | undefined;

/**
 * Start-up is over (the command is ready: `rt sidecar` and `rt run` call this once the sidecar
 * listens): settledFlags now, rather than at the first calm moment, so that a sidecar taking load
 * from its first second gets V8's optimizing compilers at once. No-op without a running reducer.
 */
export function startupOver(): void {
  settleRunning?.();
}

/** Starts the policy; returns a stop function. The timers never keep the process alive. */
export function startMemoryReducer(opts: Partial<ReducerOptions> = {}): () => void {
  const o = { ...DEFAULTS, ...opts };
  const started = Date.now();
  let calm = 0;
  let base = 0;
  let lastReduce = 0;
  let timer: NodeJS.Timeout | undefined;
  // start-up is over: V8's own flags back (the compilers, the young generation may grow under load)
  const settle = () => {
    if (timer) return;
    if (o.settledFlags) setFlagsFromString(o.settledFlags);
    base = getHeapStatistics().total_heap_size;
    const busy = loopShare();
    timer = setInterval(() => tick(busy() >= o.calmLoop), o.tickMs);
    timer.unref();
  };
  settleRunning = settle;
  // until the first calm moment (or settleMs): then what start-up left behind goes back too, once
  // (not in a process busy from the start: the policy below takes over)
  const startBusy = loopShare();
  const settleTimer = setInterval(() => {
    const busy = startBusy() >= o.calmLoop;
    const early = Date.now() - started < o.settleMs;
    if (early && (busy || (o.untilStartupOver && !timer))) return;
    clearInterval(settleTimer);
    settle();
    if (busy) return void o.onSettled?.();
    // Node keeps each loaded module's code cache in memory until the cache is flushed (at exit by
    // default): ~0.7 MB for the compiled sidecar's start-up chunks. Entries already on disk are not
    // written again; a module loaded later reads its entry from disk.
    flushCompileCache();
    reduceStartupMemory();
    base = getHeapStatistics().total_heap_size;
    o.onSettled?.();
  }, o.settleTickMs);
  settleTimer.unref();
  const tick = (busy: boolean) => {
    if (busy) {
      calm = 0;
      return;
    }
    calm++;
    const committed = getHeapStatistics().total_heap_size;
    if (calm < o.calmTicks || committed - base < o.grownBytes || Date.now() - lastReduce < o.minGapMs) return;
    reduceMemory();
    lastReduce = Date.now();
    const after = getHeapStatistics().total_heap_size;
    base = after;
    calm = 0;
    o.onReduce?.(committed, after);
  };
  return () => {
    clearInterval(settleTimer);
    clearInterval(timer);
    if (settleRunning === settle) settleRunning = undefined;
  };
}
