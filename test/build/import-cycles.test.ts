/**
 * No import cycles in the sources of the four processes and the code they share (shared/).
 * Every import between their modules counts: static ones, type-only ones (a cycle of types is
 * still two modules that cannot be read one without the other) and `import()` (a lazy import
 * does not break a cycle, it hides it). A cycle is broken by moving the shared types to a module
 * of their own or by turning a dependency around (pubsub/types.ts, options.ts,
 * workflows/journal.ts's JournaledInstance, invoke/call.ts). Nothing is left out.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importsOf, sources } from './imports.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TREES = ['sidecar/src', 'scheduler/src', 'placement/src', 'operator/src', 'injector/src', 'shared'];

/** The strongly connected components of more than one module (or a module that imports itself). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return found;
}

describe('import cycles', () => {
  it('finds a cycle through type-only and lazy imports (the check itself)', () => {
    expect(importsOf('a.ts', "import type { X } from './b.ts';\nexport { y } from './c.ts';\nconst z = () => import('./d.ts');\ntype W = typeof import('./e.ts');\nimport 'node:fs';")).toEqual([
      './b.ts',
      './c.ts',
      './d.ts',
      './e.ts',
    ]);
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['e', ['e']],
    ]);
    expect(cycles(g)).toEqual([['a', 'b', 'c'], ['e']]);
  });

  it(`none in ${TREES.join(', ')}`, () => {
    const files = TREES.flatMap((t) => sources(join(ROOT, t)));
    const graph = new Map<string, string[]>();
    for (const f of files) graph.set(f, importsOf(f, readFileSync(f, 'utf8')).map((s) => resolve(dirname(f), s)));
    const found = cycles(graph).map((c) => c.map((f) => relative(ROOT, f)).join(' <-> '));
    expect(found, 'break a cycle by moving the types both sides share to a module of their own, or by turning one dependency around; not by a lazy import').toEqual([]);
  });
});
