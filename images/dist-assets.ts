/**
 * Second half of `npm run build`: images/bundle.ts bundles the sources into dist/ (or the folder
 * named as the first argument); this copies what the code
 * reads at run time beside it (.proto files and the CRD .yaml files, found through import.meta
 * paths), writes the CRDs once more as dist/crds/crds.json (read instead of the YAML), and writes
 * dist/package.json, so `node dist/cli/rt.js` runs from dist/ + node_modules alone:
 * `type: module` for the .js files, and the version that sidecar/src/version.ts reads from
 * `../../package.json` (which is dist/package.json once compiled).
 */
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { CRDS_JSON, readCrdYaml } from '../crds/validate.ts';

const root = join(import.meta.dirname, '..');
const dist = resolve(process.argv[2] ?? join(root, 'dist'));
const SOURCE_FOLDERS = ['sidecar', 'scheduler', 'placement', 'operator', 'injector', 'cli', 'crds'];
const ASSET = /\.(proto|ya?ml)$/;

function* assetFiles(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist') continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* assetFiles(p);
    else if (ASSET.test(e.name)) yield p;
  }
}

let copied = 0;
for (const folder of SOURCE_FOLDERS) {
  const dir = join(root, folder);
  if (!existsSync(dir)) continue;
  for (const file of assetFiles(dir)) {
    cpSync(file, join(dist, relative(root, file)));
    copied++;
  }
}

// the CRDs parsed once here, so the built rt reads JSON instead of parsing YAML (crds/validate.ts)
writeFileSync(join(dist, 'crds', CRDS_JSON), JSON.stringify(readCrdYaml()));

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string };
writeFileSync(join(dist, 'package.json'), JSON.stringify({ name: pkg.name, version: pkg.version, type: 'module', private: true }, null, 2) + '\n');
console.log(`dist: ${copied} .proto/.yaml files copied, package.json written (version ${pkg.version})`);
