/**
 * Runs the benchmarks: `npm run bench` runs every bench/*.bench.ts in turn;
 * `npm run bench -- state jobs` runs the named ones. Each prints its own table.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { machineLine } from './lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
const all = readdirSync(here).filter((f) => f.endsWith('.bench.ts')).sort();
const wanted = process.argv.slice(2);
const chosen = wanted.length ? all.filter((f) => wanted.some((w) => f.startsWith(w))) : all;
if (chosen.length === 0) {
  console.error(`no benchmark matches ${wanted.join(' ')}; there are: ${all.map((f) => f.replace('.bench.ts', '')).join(', ')}`);
  process.exit(2);
}
console.log(machineLine());
let failed = 0;
for (const f of chosen) {
  console.log(`\n## ${f.replace('.bench.ts', '')}`);
  const r = spawnSync(process.execPath, [join(here, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
