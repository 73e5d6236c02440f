/**
 * The four processes (sidecar, scheduler, operator, injector) and the `rt` command (cli/) import
 * the processes only through a front door, `<package>/src/index.ts`, and share code through
 * shared/ (what several parts use: the logger, durations, SPIFFE ids, token compare, gRPC server
 * credentials, the proto loaders, rt's home folder, the clock and backoff) and crds/. A deep
 * import of another package's module fails here, unless ALLOWED names it with why; so does an
 * import of cli/ from anything below it.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { importsOf, sources } from './imports.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PACKAGES = ['sidecar', 'scheduler', 'placement', 'operator', 'injector'];
/** The outer layer: it imports the packages (through their front doors), and nothing imports it. */
const COMMAND = 'cli/';
/** Anyone may import these. */
const SHARED = ['shared/', 'crds/'];

/**
 * Deep imports that remain, by the module imported, each with why. Shrink it: an entry no import
 * uses any more fails the test.
 */
const ALLOWED: Record<string, string> = {
  'sidecar/src/sidecar.ts':
    "the `rt` command's start (cli/main.ts, run.ts, sidecar.ts, options.ts, embedded.ts, errors.ts: startSidecar, DEFAULT_OPTIONS): through the sidecar's front door it would also evaluate the operator's Component check, every built-in component's metadata declaration (12 more bundle files at start). Measured, compiled: `rt version` 205 -> 231 and 237 ms of CPU (medians of 40 interleaved runs, twice), where a quiet `rt sidecar` start is 120-215 ms",
  'sidecar/src/version.ts': "the `rt` command's start (cli/main.ts, run.ts: RUNTIME_VERSION), for the same reason as sidecar.ts",
};

const packageOf = (repoPath: string): string | undefined => PACKAGES.find((p) => repoPath.startsWith(`${p}/src/`));

/** Why an import from `from` of `to` (both repo-relative) crosses a package boundary the wrong way, or undefined. */
function boundaryProblem(from: string, to: string, allowed: Record<string, string> = ALLOWED): string | undefined {
  const source = from.startsWith('shared/') ? 'shared' : from.startsWith(COMMAND) ? 'cli' : packageOf(from);
  if (source && source !== 'cli' && to.startsWith(COMMAND)) return `${from} imports ${to}: nothing imports the \`rt\` command (cli/)`;
  const target = packageOf(to);
  if (!source || !target || source === target) return undefined;
  if (source === 'shared') return `${from} imports ${to}: shared/ depends on no package`;
  if (to === `${target}/src/index.ts` || allowed[to]) return undefined;
  return `${from} imports ${to}: import ${target}/src/index.ts (its front door), or move shared code to shared/`;
}

describe('package boundaries', () => {
  it('tells a front door, shared code and an allowed module from a deep import (the check itself)', () => {
    expect(boundaryProblem('sidecar/src/jobs/a.ts', 'scheduler/src/index.ts')).toBeUndefined();
    expect(boundaryProblem('sidecar/src/jobs/a.ts', 'sidecar/src/jobs/b.ts')).toBeUndefined();
    expect(boundaryProblem('operator/src/a.ts', 'shared/spiffe.ts')).toBeUndefined();
    expect(boundaryProblem('operator/src/a.ts', 'crds/types.ts')).toBeUndefined();
    expect(boundaryProblem('sidecar/src/jobs/a.ts', 'scheduler/src/types.ts')).toMatch(/scheduler\/src\/index\.ts \(its front door\)/);
    expect(boundaryProblem('shared/x.ts', 'sidecar/src/util/x.ts')).toMatch(/shared\/ depends on no package/);
    expect(boundaryProblem('cli/run.ts', 'sidecar/src/index.ts')).toBeUndefined();
    expect(boundaryProblem('cli/run.ts', 'cli/options.ts')).toBeUndefined();
    expect(boundaryProblem('cli/run.ts', 'shared/logger.ts')).toBeUndefined();
    expect(boundaryProblem('cli/run.ts', 'sidecar/src/http/server.ts')).toMatch(/sidecar\/src\/index\.ts \(its front door\)/);
    expect(boundaryProblem('sidecar/src/a.ts', 'cli/options.ts')).toMatch(/nothing imports the `rt` command/);
    expect(boundaryProblem('shared/x.ts', 'cli/options.ts')).toMatch(/nothing imports the `rt` command/);
    expect(boundaryProblem('scheduler/src/a.ts', 'sidecar/src/x.ts', { 'sidecar/src/x.ts': 'why' })).toBeUndefined();
  });

  const files = [...PACKAGES.map((p) => `${p}/src`), 'shared', 'cli'].flatMap((t) => sources(join(ROOT, t)));
  const edges = files.flatMap((f) => importsOf(f, readFileSync(f, 'utf8')).map((s) => ({ from: relative(ROOT, f), to: relative(ROOT, resolve(dirname(f), s)) })));

  it('the packages and the `rt` command reach a package through its front door only', () => {
    const problems = edges.map((e) => boundaryProblem(e.from, e.to)).filter((p) => p !== undefined);
    expect(problems).toEqual([]);
  });

  it('every deep import still allowed is still made (the list only shrinks)', () => {
    const used = new Set(edges.filter((e) => packageOf(e.from) !== packageOf(e.to)).map((e) => e.to));
    expect(Object.keys(ALLOWED).filter((m) => !used.has(m))).toEqual([]);
  });

  it('shared/ and crds/ are what the packages import for the code they share', () => {
    for (const s of SHARED) expect(edges.some((e) => e.to.startsWith(s) && !e.from.startsWith(s))).toBe(true);
  });

  it('a front door only re-exports, so importing it evaluates nothing of its own', () => {
    for (const p of PACKAGES) {
      const file = join(ROOT, p, 'src', 'index.ts');
      const src = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
      const other = src.statements.filter((s) => !(ts.isExportDeclaration(s) && s.moduleSpecifier));
      expect(other.map((s) => s.getText(src)), `${p}/src/index.ts`).toEqual([]);
    }
  });
});
