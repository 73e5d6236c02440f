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
if (reduce) (await import('./memory-reducer.ts')).startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS });
await import('./main.ts');
