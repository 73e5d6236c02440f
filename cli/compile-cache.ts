/**
 * Node's module compile cache (V8 code cache on disk) for rt's own code. Parsing and compiling the
 * command's modules is a third of the start-up CPU of the compiled sidecar, and from the sources it
 * also loads the TypeScript stripper; with the cache a start reads the compiled code instead
 * (bench/startup.bench.ts: start → healthz and idle RSS, docs/performance.md).
 *
 * The cache lives beside the code: dist/.compile-cache for the build (`npm run build` fills it,
 * and the image bakes it in: the image's root filesystem is read-only), .compile-cache in a
 * checkout for the sources. It is keyed by each file's content, Node's version and the user, so a
 * stale or foreign entry is only a miss. `NODE_COMPILE_CACHE=dir` puts it elsewhere and
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off (both Node's own). Failing to enable or write it never
 * stops rt: it is only slower.
 */
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';

/** <the folder above cli/>/.compile-cache: dist/ once compiled, the checkout from the sources. */
export const COMPILE_CACHE_DIR = join(import.meta.dirname, '..', '.compile-cache');

try {
  // portable: entries name files relative to the cache, so a build made in one folder (the image's
  // build stage) stays valid where it is copied to
  enableCompileCache({ directory: COMPILE_CACHE_DIR, portable: true });
} catch {
  // Node 22 takes only a directory
  try {
    enableCompileCache(COMPILE_CACHE_DIR);
  } catch {
    // no cache: only slower
  }
}
