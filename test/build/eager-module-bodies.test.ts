/**
 * images/eager-module-bodies.ts: esbuild's module wrappers become parenthesised function
 * expressions (compiled by V8 with their chunk, so cached) and the code still runs the same, with
 * braces in strings, templates, regular expressions and nested functions.
 */
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { eagerModuleBodies } from '../../images/eager-module-bodies.ts';

// esbuild's helpers, as its bundles define them (the shape matters, not the text)
const HELPERS = `var __getOwnPropNames = Object.getOwnPropertyNames;
var __esm = (fn, res) => function () { return fn && (res = (0, fn[__getOwnPropNames(fn)[0]])(fn = 0)), res; };
var __commonJS = (cb, mod) => function () { return mod || (0, cb[__getOwnPropNames(cb)[0]])((mod = { exports: {} }).exports, mod), mod.exports; };
`;

const run = (code: string): unknown => runInNewContext(`${HELPERS}${code}\nresult;`, {});

describe('eager module bodies', () => {
  it("turns esbuild's CommonJS and lazy-ESM wrappers into parenthesised function expressions", () => {
    const src = `var require_a = __commonJS({"node_modules/a/index.js"(exports, module) { module.exports = { x: 1 }; }});
var x; var init_b = __esm({"src/b.ts"() { x = require_a().x + 1; }});
var other = call({"k"(a) { return a; }});
init_b(); var result = [x, other];
function call(o) { return o.k(5); }`;
    const { source, wrapped } = eagerModuleBodies(src);
    expect(wrapped).toBe(2);
    expect(source).toContain('__commonJS({"node_modules/a/index.js":(function(exports, module) { module.exports = { x: 1 }; })})');
    expect(source).toContain('__esm({"src/b.ts":(function() { x = require_a().x + 1; })})');
    // any other object's methods stay methods
    expect(source).toContain('call({"k"(a) { return a; }})');
    expect(run(source)).toEqual(run(src));
  });

  it('leaves a source without wrappers as it is', () => {
    const src = 'export const f = (a) => ({ g() { return a; } });';
    expect(eagerModuleBodies(src)).toEqual({ source: src, wrapped: 0 });
  });

  it('keeps what the module bodies compute, whatever braces and nesting they hold (property)', () => {
    const snippets = [
      'out.push("}{");',
      'out.push(`${"}"}{`);',
      'out.push(/[{}]+/.exec("a}{b")[0]);',
      "out.push('\\'}');",
      'out.push((() => { return "{"; })());',
      'out.push(function () { return { a: "}" }; }().a);',
      '/* } */ out.push(1);',
      'if (out.length > 2) { out.push({ m() { return "}"; } }.m()); }',
    ];
    fc.assert(
      fc.property(fc.array(fc.array(fc.constantFrom(...snippets), { maxLength: 6 }), { minLength: 1, maxLength: 5 }), (modules) => {
        const src =
          'var out = [];\n' +
          modules.map((body, i) => `var require_m${i} = __commonJS({"node_modules/m${i}.js"(exports, module) { ${body.join(' ')} module.exports = out.length; }});`).join('\n') +
          `\nvar result = [${modules.map((_, i) => `require_m${i}()`).join(', ')}, out];`;
        const { source, wrapped } = eagerModuleBodies(src);
        expect(wrapped).toBe(modules.length);
        expect(JSON.stringify(run(source))).toBe(JSON.stringify(run(src)));
      }),
      { numRuns: 200 },
    );
  });
});
