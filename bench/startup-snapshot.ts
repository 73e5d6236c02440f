/**
 * An experiment for bench/startup.bench.ts, not a way rt runs: `rt sidecar` from a Node startup
 * snapshot (`node --snapshot-blob x.blob --build-snapshot entry.cjs`, then `node --snapshot-blob
 * x.blob sidecar …`), where V8 deserializes the heap the entry left instead of loading and running
 * the modules. It measures what a snapshot would buy; docs/ARCHITECTURE.md "Dependencies as
 * published" says why rt does not ship one.
 *
 * A snapshot's entry is one CommonJS script whose `require` gives Node's built-ins only, so the
 * sidecar is bundled into one file (esbuild, format cjs: the lazy chunks of the compiled build are
 * inlined too, their source text held in the heap). Node 24 cannot put `node:http`, `https`,
 * `http2`, `tls` or `sqlite` in a snapshot (the build aborts on their native handles), so each is
 * a module of getters that requires the real one at its first read after start. undici, fastify
 * and grpc-js read some of their exports when they load: constants (`STATUS_CODES`,
 * `maxHeaderSize`, `http2.constants`) are copied here; `http.IncomingMessage`, which undici's
 * `destroy()` compares a stream's constructor with, becomes a stand-in, so that check is always
 * false in the experiment: a change of behaviour a shipped build could not accept. Packages the
 * compiled build keeps in node_modules are required from there at their first use.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as esbuild from 'esbuild';

const ROOT = join(import.meta.dirname, '..');
/** Built-ins a snapshot cannot hold (Node 24): required at their first read after start. */
const DEFERRED_BUILTINS = new Set(['http', 'https', 'http2', 'tls', 'sqlite']);
/** As images/bundle.ts EXTERNAL: left in node_modules. */
const EXTERNAL = ['ssh2', 'cpu-features', 'pg-cloudflare', 'pg-native', '@kubernetes/client-node', 'thread-stream', 'kerberos'];

const ENTRY = `
import { startupSnapshot } from 'node:v8';
import { applyV8Flags, SETTLED_V8_FLAGS } from './v8-flags.ts';
import { startMemoryReducer } from './memory-reducer.ts';
import { sidecarCommand } from './sidecar.ts';
startupSnapshot.setDeserializeMainFunction(async () => {
  globalThis.__rtSnapshotBuilding = false;
  if (applyV8Flags()) startMemoryReducer({ settledFlags: SETTLED_V8_FLAGS });
  process.exitCode = await sidecarCommand(process.argv.slice(2));
});
`;

/** A built-in as getters; read while the snapshot is built, a constant is the copy made here. */
function deferredBuiltin(name: string): string {
  const real = createRequire(import.meta.url)(`node:${name}`) as Record<string, unknown>;
  const copies = Object.fromEntries(Object.entries(real).filter(([, v]) => v !== null && typeof v !== 'function' && (typeof v !== 'object' || isPlain(v))));
  return [
    `let m; const load = () => (m ??= process.getBuiltinModule(${JSON.stringify(`node:${name}`)}));`,
    `const copies = ${JSON.stringify(copies)};`,
    `for (const k of ${JSON.stringify(Object.keys(real))}) Object.defineProperty(module.exports, k, { enumerable: true, get: () => {`,
    '  if (!globalThis.__rtSnapshotBuilding) return load()[k];',
    '  if (k in copies) return copies[k];',
    '  return function standIn() { throw new Error("a stand-in of a built-in read while the snapshot was built"); };',
    '} });',
  ].join('\n');
}
const isPlain = (v: unknown): boolean => {
  try {
    return JSON.stringify(v) !== undefined && Object.getPrototypeOf(v) === Object.prototype;
  } catch {
    return false;
  }
};

const plugins: esbuild.Plugin[] = [
  {
    // each source file's import.meta names the source file (the bench runs beside the sources)
    name: 'source-import-meta',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        if (args.path.includes('/node_modules/')) return undefined;
        const contents = readFileSync(args.path, 'utf8').replace(/\bimport\.meta\.(dirname|filename|url)\b/g, (_m, k: string) =>
          JSON.stringify(k === 'dirname' ? dirname(args.path) : k === 'filename' ? args.path : `file://${args.path}`),
        );
        return { contents, loader: 'ts', resolveDir: dirname(args.path) };
      });
    },
  },
  {
    name: 'deferred-builtins',
    setup(build) {
      const names = new Set(builtinModules);
      build.onResolve({ filter: /^[a-z_:/0-9]+$/ }, (args) => {
        const name = args.path.replace(/^node:/, '');
        return names.has(name) && DEFERRED_BUILTINS.has(name) ? { path: name, namespace: 'deferred-builtin' } : undefined;
      });
      build.onLoad({ filter: /.*/, namespace: 'deferred-builtin' }, (args) => ({ contents: deferredBuiltin(args.path), loader: 'js' }));
    },
  },
  {
    name: 'node-modules-at-run-time',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => (EXTERNAL.some((e) => args.path === e || args.path.startsWith(`${e}/`)) ? { path: args.path, namespace: 'run-time' } : undefined));
      build.onLoad({ filter: /.*/, namespace: 'run-time' }, (args) => ({
        loader: 'js',
        contents: `let m; const load = () => (m ??= process.getBuiltinModule('node:module').createRequire(${JSON.stringify(join(ROOT, 'package.json'))})(${JSON.stringify(args.path)}));
module.exports = new Proxy(function () {}, { get: (_t, k) => load()[k], has: (_t, k) => k in load(), construct: (_t, a) => new (load())(...a), apply: (_t, self, a) => load().apply(self, a) });`,
      }));
    },
  },
];

/** Builds the bundle and the blob into `dir`; the blob's path, or why it could not be built. */
export async function buildSnapshot(dir: string): Promise<{ blob: string } | { error: string }> {
  const script = join(dir, 'sidecar-snapshot.cjs');
  await esbuild.build({
    absWorkingDir: ROOT,
    stdin: { contents: ENTRY, loader: 'ts', resolveDir: join(ROOT, 'cli'), sourcefile: 'snapshot-entry.ts' },
    outfile: script,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node24',
    banner: { js: 'globalThis.__rtSnapshotBuilding = true;' },
    plugins,
    minifyWhitespace: true,
    minifySyntax: true,
    charset: 'ascii',
    legalComments: 'none',
    logLevel: 'error',
  });
  // the entry's require() gives built-ins only, and it has no import(): those of built-ins and of
  // the packages left in node_modules become requires at run time
  const source = readFileSync(script, 'utf8')
    .replace(/\bimport\("(node:[^"]+)"\)/g, 'Promise.resolve(process.getBuiltinModule("$1"))')
    .replace(/\bimport\("([^".][^"]*)"\)/g, `Promise.resolve().then(() => process.getBuiltinModule("node:module").createRequire(${JSON.stringify(join(ROOT, 'package.json'))})("$1"))`);
  writeFileSync(script, source);
  const blob = join(dir, 'sidecar.blob');
  const r = spawnSync(process.execPath, ['--snapshot-blob', blob, '--build-snapshot', script], { encoding: 'utf8' });
  if (r.status !== 0) return { error: `node --build-snapshot exited with ${r.status ?? r.signal}: ${r.stderr.split('\n').filter((l) => !/fully verified|may still work|request support|trace-warnings/.test(l)).slice(0, 3).join(' ')}` };
  return { blob };
}
