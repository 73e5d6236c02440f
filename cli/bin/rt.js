#!/usr/bin/env node
// `rt` on PATH (npx rt, npm start): checks the Node version in plain JavaScript, which every Node
// can parse, before loading the TypeScript entry that only Node >= 22.19 runs without flags.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(
    `rt needs Node.js 22.19 or newer (this is ${process.version} at ${process.execPath}). ` +
      'Run it through npm (`npm start`, `npx rt`), which uses the Node 24 that `npm install` put in node_modules/.bin, or put Node 24 first on your PATH.',
  );
  process.exit(1);
}
// the compile cache first (cli/compile-cache.ts says why; the same folder): with it on before the
// first TypeScript file, a start from a warm cache does not load Node's TypeScript stripper at all
const { default: nodeModule } = await import('node:module');
try {
  nodeModule.enableCompileCache?.({ directory: new URL('../../.compile-cache', import.meta.url).pathname, portable: true });
} catch {
  // only slower
}
await import('../rt.ts');
