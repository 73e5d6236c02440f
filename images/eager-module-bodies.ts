/**
 * Part of `npm run build` (images/bundle.ts): the bodies of the bundled CommonJS and lazily
 * initialised modules become parenthesised function expressions, so that V8 compiles them with
 * their chunk and Node's compile cache holds their bytecode.
 *
 * esbuild wraps each such module as a method, `__commonJS({ "node_modules/x.js"(exports, module)
 * { … } })` (`__esm` alike), which V8 compiles lazily, at its first call. Node writes a module's
 * compile cache right after compiling it, before it runs (src/compile_cache.cc), so a lazily compiled
 * function is never in it: every start parsed and compiled fastify's, pino's and undici's module
 * bodies from source. V8 compiles a function in parentheses eagerly (its "PIFE" heuristic), so
 * `"node_modules/x.js": (function (exports, module) { … })` is compiled with the chunk and cached.
 * Measured: 5% fewer instructions from process start to healthz (callgrind), bench/README.md
 * `### startup`. A method and a function expression called as `(0, fn)(exports, module)` behave the
 * same: neither uses `this`, `super` or `new`.
 */
import { parse } from 'acorn';

interface AstNode {
  type: string;
  start: number;
  end: number;
  [key: string]: unknown;
}

const isNode = (v: unknown): v is AstNode => typeof v === 'object' && v !== null && typeof (v as AstNode).type === 'string';

/** Each `__commonJS({...})` / `__esm({...})` call in the tree. */
function* wrapperCalls(node: AstNode): Generator<AstNode> {
  if (node.type === 'CallExpression') {
    const callee = node.callee as AstNode & { name?: string };
    if (callee.type === 'Identifier' && (callee.name === '__commonJS' || callee.name === '__esm')) yield node;
  }
  for (const value of Object.values(node)) {
    if (Array.isArray(value)) {
      for (const v of value) if (isNode(v)) yield* wrapperCalls(v);
    } else if (isNode(value)) yield* wrapperCalls(value);
  }
}

/** The chunk's source with every module body a parenthesised function expression; how many were changed. */
export function eagerModuleBodies(source: string): { source: string; wrapped: number } {
  const ast = parse(source, { ecmaVersion: 'latest', sourceType: 'module', allowHashBang: true }) as unknown as AstNode;
  // [position in source, text to insert there]
  const inserts: [number, string][] = [];
  for (const call of wrapperCalls(ast)) {
    const [arg] = call.arguments as AstNode[];
    if (arg?.type !== 'ObjectExpression') continue;
    for (const prop of arg.properties as AstNode[]) {
      if (prop.type !== 'Property' || !prop.method) continue;
      const fn = prop.value as AstNode & { async?: boolean; generator?: boolean };
      if (fn.async || fn.generator) continue;
      // "key"(params) { body }  →  "key": (function (params) { body })
      inserts.push([(prop.key as AstNode).end, ':(function'], [fn.end, ')']);
    }
  }
  const pieces: string[] = [];
  let from = 0;
  for (const [at, text] of inserts.sort((a, b) => a[0] - b[0])) {
    pieces.push(source.slice(from, at), text);
    from = at;
  }
  pieces.push(source.slice(from));
  return { source: pieces.join(''), wrapped: inserts.length / 2 };
}
