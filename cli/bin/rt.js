#!/usr/bin/env node
// `rt` on PATH (npx rt, npm start): checks the Node version in plain JavaScript, which every Node
// can parse, before loading the compiled build (dist/, when up to date) or the TypeScript entry that
// only Node >= 22.19 runs without flags.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(
    `rt needs Node.js 22.19 or newer (this is ${process.version} at ${process.execPath}). ` +
      'Run it through npm (`npm start`, `npx rt`), which uses the Node 24 that `npm install` put in node_modules/.bin, or put Node 24 first on your PATH.',
  );
  process.exit(1);
}
// the compile cache first (cli/compile-cache.ts says why; the same folder): with it on before the
// first TypeScript file, a start from a warm cache does not load Node's TypeScript stripper at all.
// Beside a build, the build's cache, which `npm run build` filled for the compiled modules
const [{ default: nodeModule }, { existsSync }] = await Promise.all([import('node:module'), import('node:fs')]);
const built = existsSync(new URL('../../dist/build-stamp.json', import.meta.url));
try {
  nodeModule.enableCompileCache?.({ directory: new URL(built ? '../../dist/.compile-cache' : '../../.compile-cache', import.meta.url).pathname, portable: true });
} catch {
  // only slower
}
// the compiled build when `npm run build` made one and no source changed since (cli/compiled-build.ts):
// it starts faster and holds less memory than the sources; RT_FROM_SOURCES=1 runs the sources
const { upToDateBuild } = built ? await import('../compiled-build.ts') : { upToDateBuild: () => undefined };
await import(upToDateBuild(new URL('../..', import.meta.url).pathname) ?? '../rt.ts');
