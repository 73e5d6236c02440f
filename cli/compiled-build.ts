/**
 * Whether `rt` on PATH (`npx rt`, `npm start`: cli/bin/rt.js) runs the compiled build, dist/, instead
 * of the TypeScript sources: it does when `npm run build` made one and no file it was built from
 * changed since. The compiled build starts faster and holds less memory (bench/README.md
 * `### startup`); the sources need no build step, so an edited checkout runs them as they are.
 *
 * The build writes dist/build-stamp.json (images/dist-assets.ts) with the newest modification time
 * of what it read; the bin compares it with the files now. Deleting a file changes its folder's
 * time, and `npm install` rewrites node_modules/.package-lock.json, so both count. `RT_FROM_SOURCES=1`
 * runs the sources regardless.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** What the build reads, relative to the checkout: the source folders, the build scripts, the dependencies. */
export const BUILD_INPUTS = ['cli', 'sidecar', 'scheduler', 'placement', 'operator', 'injector', 'shared', 'crds', 'images', 'package.json', 'node_modules/.package-lock.json'];
export const BUILD_STAMP = 'build-stamp.json';

export interface BuildStamp {
  /** The newest modification time (ms) of BUILD_INPUTS when the build was made. */
  inputsMtimeMs: number;
}

/** The newest modification time (ms) of a file or folder and, for a folder, of everything in it. */
function newestMtime(path: string): number {
  let st;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const e of readdirSync(path, { withFileTypes: true, recursive: true })) {
    const t = statSync(join(e.parentPath, e.name), { throwIfNoEntry: false })?.mtimeMs ?? 0;
    if (t > newest) newest = t;
  }
  return newest;
}

/** The newest modification time of the build's inputs in the checkout at `root`. */
export function buildInputsMtime(root: string): number {
  return Math.max(...BUILD_INPUTS.map((p) => newestMtime(join(root, p))));
}

/** dist/cli/rt.js of the checkout at `root` when it is there and up to date with its inputs; otherwise undefined. */
export function upToDateBuild(root: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.RT_FROM_SOURCES === '1' || env.RT_FROM_SOURCES === 'true') return undefined;
  const dist = join(root, 'dist');
  let stamp: BuildStamp;
  try {
    stamp = JSON.parse(readFileSync(join(dist, BUILD_STAMP), 'utf8')) as BuildStamp;
    statSync(join(dist, 'cli', 'rt.js'));
  } catch {
    return undefined;
  }
  if (typeof stamp.inputsMtimeMs !== 'number' || buildInputsMtime(root) > stamp.inputsMtimeMs) return undefined;
  return join(dist, 'cli', 'rt.js');
}
