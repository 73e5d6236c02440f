/**
 * Runs the benchmarks: `npm run bench` runs every bench/*.bench.ts in turn;
 * `npm run bench -- state jobs` runs the named ones. Each prints its own table.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { machineLine } from './lib.ts';
import { startSharedServices } from '../test/services/shared-services.ts';

const here = dirname(fileURLToPath(import.meta.url));
const all = readdirSync(here).filter((f) => f.endsWith('.bench.ts')).sort();
const wanted = process.argv.slice(2);
const chosen = wanted.length ? all.filter((f) => wanted.some((w) => f.startsWith(w))) : all;
if (chosen.length === 0) {
  console.error(`no benchmark matches ${wanted.join(' ')}; there are: ${all.map((f) => f.replace('.bench.ts', '')).join(', ')}`);
  process.exit(2);
}
console.log(machineLine());
// the same private Redis/PostgreSQL as the tests (unless RT_TEST_*_URL names them); children inherit the URLs
const services = await startSharedServices();
// the sidecars' registry and sockets (RT_HOME) in a folder of the run's own, not the user's ~/.rt
const home = process.env.RT_HOME ? undefined : mkdtempSync(join(tmpdir(), 'rt-bench-home-'));
if (home) process.env.RT_HOME = home;
let failed = 0;
try {
  for (const f of chosen) {
    console.log(`\n## ${f.replace('.bench.ts', '')}`);
    const r = spawnSync(process.execPath, [join(here, f)], { stdio: 'inherit' });
    if (r.status !== 0) failed++;
  }
} finally {
  await services.stop();
  if (home) rmSync(home, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
