#!/usr/bin/env node
/**
 * The `rt` command's entry: V8's heap flags, then the compile cache, then the command itself
 * (cli/main.ts). The command is imported only after the cache is on, since a static import would be
 * compiled before any line of this file runs.
 */
import './v8-flags.ts';
import './compile-cache.ts';

await import('./main.ts');
