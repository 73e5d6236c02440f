/**
 * Part of `npm run build` (images/bundle.ts): esbuild's `__toESM` helper, which gives an ES module
 * its view of a CommonJS module's exports, made once per exports object instead of once per import.
 *
 * esbuild calls `__toESM(require_x(), 1)` at every `import` of a CommonJS module (Node's built-ins
 * included: images/bundle.ts builtinsAsRequire), and each call makes a new object with a getter per
 * export: ~250 import sites, `node:fs` alone with ~100 exports, at every start. The views are alike
 * (each getter reads the exports object live), so one is shared. It is made anew if the exports
 * object has more own names than when it was made (a module that adds exports after an importer
 * first saw it). Measured: 5% fewer instructions from process start to healthz (callgrind),
 * bench/README.md `### startup`.
 */

/** esbuild's helper as its minified output writes it (esbuild 0.28). */
export const ESBUILD_TO_ESM =
  'var __toESM=(mod,isNodeMode,target)=>(target=mod!=null?__create(__getProtoOf(mod)):{},__copyProps(isNodeMode||!mod||!mod.__esModule?__defProp(target,"default",{value:mod,enumerable:!0}):target,mod))';

// the same helper renamed __toESMFresh, and __toESM in front of it, sharing a view per exports object
const MEMOIZED = [
  'var __toESMViews=new WeakMap,',
  '__toESM=(mod,isNodeMode)=>{',
  'if(mod===null||typeof mod!="object"&&typeof mod!="function")return __toESMFresh(mod,isNodeMode);',
  'const names=__getOwnPropNames(mod).length,views=__toESMViews.get(mod)??[],seen=views[isNodeMode?1:0];',
  'if(seen&&seen.names===names)return seen.view;',
  'const view=__toESMFresh(mod,isNodeMode);',
  'views[isNodeMode?1:0]={view,names};__toESMViews.set(mod,views);return view},',
  ESBUILD_TO_ESM.replace('var __toESM=', '__toESMFresh='),
].join('');

/** The chunk's source with esbuild's `__toESM` memoized, and whether it defined one. */
export function memoizedToEsm(source: string): { source: string; replaced: boolean } {
  if (!source.includes(ESBUILD_TO_ESM)) return { source, replaced: false };
  return { source: source.replace(ESBUILD_TO_ESM, MEMOIZED), replaced: true };
}
