/**
 * Run in the Dockerfile's deps stage: removes from node_modules what nothing loads at run time —
 * type declarations, source maps, TypeScript sources (Node does not strip types under
 * node_modules) and Markdown other than licences. About half of the production tree.
 *   node prune-node-modules.ts <node_modules folder>
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

const UNUSED = /(\.d\.[mc]?ts|\.[mc]?ts|\.map|\.md|\.markdown)$/i;
const KEEP = /^(licen[cs]e|notice|copying)/i;

function prune(dir: string): number {
  let freed = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) freed += prune(p);
    else if (e.isFile() && UNUSED.test(e.name) && !KEEP.test(e.name)) {
      freed += statSync(p).size;
      rmSync(p);
    }
  }
  return freed;
}

const root = process.argv[2];
if (!root) throw new Error('usage: node prune-node-modules.ts <node_modules folder>');
console.log(`pruned ${(prune(root) / 1e6).toFixed(1)} MB from ${root}`);
