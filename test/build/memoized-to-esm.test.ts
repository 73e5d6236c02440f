/**
 * images/memoized-to-esm.ts against the helper esbuild really emits: the same view of a CommonJS
 * module's exports for each import, live values, default and named exports as esbuild's own
 * helper gives them, and a new view once the module has added exports.
 */
import { runInNewContext } from 'node:vm';
import * as esbuild from 'esbuild';
import { describe, expect, it } from 'vitest';
import { ESBUILD_TO_ESM, memoizedToEsm } from '../../images/memoized-to-esm.ts';

/** esbuild's runtime helpers as this esbuild minifies them, from a bundle that needs __toESM. */
async function esbuildHelpers(): Promise<string> {
  const out = await esbuild.build({
    stdin: { contents: 'import fs from "cjs"; import { a } from "cjs"; console.log(fs, a);', resolveDir: import.meta.dirname },
    plugins: [{ name: 'cjs', setup: (b) => (b.onResolve({ filter: /^cjs$/ }, () => ({ path: 'cjs', namespace: 'cjs' })), b.onLoad({ filter: /.*/, namespace: 'cjs' }, () => ({ contents: 'module.exports = { a: 1 };', loader: 'js' }))) }],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    minifyWhitespace: true,
    minifySyntax: true,
  });
  const text = out.outputFiles[0]!.text;
  return text.slice(0, text.indexOf('var require_cjs'));
}

describe("esbuild's __toESM, memoized", () => {
  it('finds the helper in what this esbuild emits (else the build stops)', async () => {
    expect(await esbuildHelpers()).toContain(ESBUILD_TO_ESM);
  });

  it('gives every import of a module the same view, with the values esbuild gives, read live', async () => {
    const { source, replaced } = memoizedToEsm(await esbuildHelpers());
    expect(replaced).toBe(true);
    const got = runInNewContext(
      `${source}
      const fresh = (m) => __toESMFresh(m, 1);
      const mod = { a: 1, b() { return 2; } };
      const one = __toESM(mod, 1), two = __toESM(mod, 1);
      const same = one === two;
      const asEsbuild = JSON.stringify(Object.keys(one)) === JSON.stringify(Object.keys(fresh(mod))) && one.default === mod && one.a === 1 && one.b() === 2;
      mod.a = 5;
      const live = two.a;
      mod.c = 3;
      const three = __toESM(mod, 1);
      ({ same, asEsbuild, live, renewed: three !== one && three.c === 3, notNodeMode: __toESM(mod) !== one, nullish: __toESM(null, 1).default === null && __toESM(undefined, 1).default === undefined });`,
      {},
    ) as Record<string, unknown>;
    expect(got).toEqual({ same: true, asEsbuild: true, live: 5, renewed: true, notNodeMode: true, nullish: true });
  });

  it('leaves a chunk without the helper as it is', () => {
    expect(memoizedToEsm('const x = 1;')).toEqual({ source: 'const x = 1;', replaced: false });
  });
});
