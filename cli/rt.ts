#!/usr/bin/env node
/**
 * The `rt` command's entry: V8's flags before any module is resolved (cli/v8-flags.ts has no
 * imports, so the build keeps it in this file), then the memory reducer, the compile cache and the
 * command itself (cli/main.ts). Everything else is imported dynamically, in that order: a static
 * import would be resolved, and compiled without the cache, before any line of this file runs.
 */
import { applyV8Flags, SETTLED_V8_FLAGS } from './v8-flags.ts';

const reduce = applyV8Flags();
await import('./compile-cache.ts');
// `rt sidecar` and `rt run` say when they are ready (startupOver): until then, or 60 s, start-up
// goes on, so every start compiles the same modules under the same flags (the compile cache's check)
const saysWhenReady = process.argv[2] === 'sidecar' || process.argv[2] === 'run';
if (reduce) (await import('./memory-reducer.ts')).startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS, ...(saysWhenReady && { untilStartupOver: true, settleMs: 60_000 }) });
await import('./main.ts');
