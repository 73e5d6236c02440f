/**
 * `npx rt` and `npm start` (cli/bin/rt.js) run the compiled build when `npm run build` made one and
 * nothing it was built from changed since, and the TypeScript sources otherwise
 * (cli/compiled-build.ts). Checked on a checkout-shaped temp folder holding the real bin and
 * decision module, a stand-in `cli/rt.ts` and `dist/cli/rt.js` that say which one ran.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { BUILD_STAMP, buildInputsMtime, upToDateBuild } from '../../cli/compiled-build.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'rt-compiled-build-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

let root: string;
let n = 0;
/** A checkout with sources, a build made from them, and its stamp. */
function checkout(): string {
  const dir = join(work, `c${n++}`);
  mkdirSync(join(dir, 'cli', 'bin'), { recursive: true });
  mkdirSync(join(dir, 'sidecar', 'src'), { recursive: true });
  mkdirSync(join(dir, 'dist', 'cli'), { recursive: true });
  copyFileSync(join(ROOT, 'cli', 'bin', 'rt.js'), join(dir, 'cli', 'bin', 'rt.js'));
  copyFileSync(join(ROOT, 'cli', 'compiled-build.ts'), join(dir, 'cli', 'compiled-build.ts'));
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(join(dir, 'cli', 'rt.ts'), "console.log('sources');\n");
  writeFileSync(join(dir, 'sidecar', 'src', 'a.ts'), 'export {};\n');
  writeFileSync(join(dir, 'dist', 'cli', 'rt.js'), "console.log('compiled');\n");
  writeFileSync(join(dir, 'dist', 'package.json'), '{"type":"module"}');
  // every input a second in the past, so that a change made now is newer than the stamp
  const past = new Date(Date.now() - 60_000);
  for (const p of ['cli/bin/rt.js', 'cli/compiled-build.ts', 'cli/rt.ts', 'cli/bin', 'cli', 'sidecar/src/a.ts', 'sidecar/src', 'sidecar', 'package.json']) utimesSync(join(dir, p), past, past);
  writeFileSync(join(dir, 'dist', BUILD_STAMP), JSON.stringify({ inputsMtimeMs: buildInputsMtime(dir) }));
  return dir;
}

const runBin = (env: NodeJS.ProcessEnv = {}) => {
  const { RT_FROM_SOURCES: _, ...rest } = process.env;
  const r = spawnSync(process.execPath, [join(root, 'cli', 'bin', 'rt.js')], { encoding: 'utf8', env: { ...rest, ...env } });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
};

describe('rt on PATH runs the compiled build when it is up to date (cli/compiled-build.ts)', () => {
  beforeEach(() => {
    root = checkout();
  });

  it('runs dist/cli/rt.js when the build is as new as its inputs', () => {
    expect(upToDateBuild(root, {})).toBe(join(root, 'dist', 'cli', 'rt.js'));
    expect(runBin()).toBe('compiled');
  });

  it('runs the sources once a source file changed after the build', () => {
    writeFileSync(join(root, 'sidecar', 'src', 'a.ts'), 'export const x = 1;\n');
    expect(upToDateBuild(root, {})).toBeUndefined();
    expect(runBin()).toBe('sources');
  });

  it('runs the sources once a source file was deleted (its folder changed)', () => {
    rmSync(join(root, 'sidecar', 'src', 'a.ts'));
    expect(upToDateBuild(root, {})).toBeUndefined();
  });

  it('runs the sources without a build, without a stamp, or with RT_FROM_SOURCES=1', () => {
    expect(runBin({ RT_FROM_SOURCES: '1' })).toBe('sources');
    rmSync(join(root, 'dist', BUILD_STAMP));
    expect(upToDateBuild(root, {})).toBeUndefined();
    rmSync(join(root, 'dist'), { recursive: true });
    expect(runBin()).toBe('sources');
  });

  it('runs the sources when the stamp is not one the build writes', () => {
    writeFileSync(join(root, 'dist', BUILD_STAMP), '{"inputsMtimeMs":"soon"}');
    expect(upToDateBuild(root, {})).toBeUndefined();
    writeFileSync(join(root, 'dist', BUILD_STAMP), 'not json');
    expect(upToDateBuild(root, {})).toBeUndefined();
  });
});
