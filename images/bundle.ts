/**
 * First half of `npm run build`: esbuild bundles the `rt` command (cli/rt.ts and everything it
 * imports, dependencies included) into dist/cli/rt.js, with one chunk per lazy `import()` in
 * dist/chunks/ (component SDKs, the scheduler/operator/injector commands stay unloaded until
 * used). One file instead of ~1,100 modules is what cuts the start time and the loader's memory
 * (bench/startup.bench.ts).
 *
 * Code that finds files beside itself (`.proto`, CRD `.yaml`, package.json) does so through
 * `import.meta.url`/`import.meta.dirname`; in a bundle those would all name dist/cli/rt.js, so
 * each source file's own are replaced by the URL it would have as dist/<its path>.js, where
 * images/dist-assets.ts copies those files.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import { eagerModuleBodies } from './eager-module-bodies.ts';
import { memoizedToEsm } from './memoized-to-esm.ts';
import { precompiledModule } from './validators.ts';
import { BUILD_STAMP, buildInputsMtime, type BuildStamp } from '../cli/compiled-build.ts';

const root = join(import.meta.dirname, '..');
/** dist/, or the folder named as the first argument (test/build/bundle.test.ts builds into a temp one). */
const dist = resolve(process.argv[2] ?? join(root, 'dist'));

/**
 * Dependencies never bundled: native addons, optional dependencies (the image installs without
 * them) and packages that read files beside themselves. (@kubernetes/client-node is a dev
 * dependency: rt imports only its types, shared/kube/ is the client.)
 */
const EXTERNAL = ['ssh2', 'cpu-features', 'pg-cloudflare', 'pg-native', 'thread-stream'];

const ownImportMeta: esbuild.Plugin = {
  name: 'own-import-meta',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path.includes(`${join('/', 'node_modules')}/`)) return undefined;
      const source = ownLazyRequires(lazyPackageImports(await readFile(args.path, 'utf8')), args.path);
      if (!source.includes('import.meta.')) return { contents: source, loader: 'ts', resolveDir: dirname(args.path) };
      // the URL of dist/<path>.js, from the bundle chunk's own URL at run time
      const rel = relative(root, args.path).replace(/\.ts$/, '.js');
      const fileUrl = `new URL(${JSON.stringify(`../${rel}`)}, import.meta.url)`;
      const contents = source.replace(/\bimport\.meta\.(dirname|filename|url)\b/g, (_m, key: string) =>
        key === 'dirname' ? `__rtDirname(${fileUrl})` : key === 'filename' ? `__rtFilename(${fileUrl})` : `${fileUrl}.href`,
      );
      return { contents, loader: 'ts', resolveDir: dirname(args.path) };
    });
  },
};

/**
 * `await import('pkg')` of a CommonJS package: Node gives its exports as named ones, a bundle chunk
 * only as `default`. `__rtNamespace` (banner) spreads them out again, so `const { Registry } =
 * await import('prom-client')` works in both.
 */
function lazyPackageImports(source: string): string {
  return source.replace(/(?<!typeof\s*)\bimport\((['"])([^.'"][^'"]*)\1\)/g, (m, _q: string, spec: string) => (spec.startsWith('node:') ? m : `${m}.then(__rtNamespace)`));
}

/**
 * An object whose first property read evaluates `load` (a require), for a module that its importer
 * requires when it loads but uses only later.
 */
const onFirstRead = (load: string) => `((m) => new Proxy({}, { get: (_t, k) => (m ??= ${load})[k] }))()`;

/**
 * Modules loaded on first use, synchronously (CEL, yaml, protobufjs, grpc-js, pino-pretty,
 * fastify's schema compilers, undici's HTTP parsers …), each built as an entry of its own,
 * dist/lazy/<name>.js, and required from there at that first call (Node's `require()` of an ES
 * module, `__rtLazy` in the banner). Bundled like the rest, a module that is only required later
 * still sits in a chunk that loads at start, where its source text alone is held by V8: CEL's,
 * grpc-js's and protobufjs's chunks were ~7 MB of an idle sidecar's RSS (bench/README.md
 * `### startup`). Entry name → the module, resolved from the repo root or from the file named.
 */
// An entry with `from` rewrites that dependency's file, pinned in images/patched-dependencies.ts.
const LAZY: Record<string, { spec: string; from?: string; topLevel?: boolean }> = {
  'grpc-js': { spec: '@grpc/grpc-js' },
  'proto-loader': { spec: '@grpc/proto-loader' },
  protobufjs: { spec: 'protobufjs' },
  cel: { spec: '@bufbuild/cel' },
  yaml: { spec: 'yaml' },
  'pino-pretty': { spec: 'pino-pretty' },
  'ajv-compiler': { spec: '@fastify/ajv-compiler', from: 'fastify/lib/schema-controller.js' },
  // the routes' validators are compiled at build time (validators.ts); ajv itself only for the sources
  ajv: { spec: 'ajv' },
  'fast-json-stringify-compiler': { spec: '@fastify/fast-json-stringify-compiler', from: 'fastify/lib/schema-controller.js' },
  'llhttp-wasm': { spec: '../llhttp/llhttp-wasm.js', from: 'undici/lib/dispatcher/client-h1.js' },
  'llhttp-simd-wasm': { spec: '../llhttp/llhttp_simd-wasm.js', from: 'undici/lib/dispatcher/client-h1.js' },
  'milo-simd': { spec: '../milo/simd.js', from: 'undici/lib/dispatcher/parser-h1.js' },
  'milo-no-simd': { spec: '../milo/no-simd.js', from: 'undici/lib/dispatcher/parser-h1.js' },
  // fastify checks a plugin's declared fastify version with it; rt's plugins declare none. Required
  // when fastify's module loads, so it gets an object whose first property read requires it
  // (semver builds its ~50 regexes when it loads: ~15 ms of start)
  semver: { spec: 'semver', from: 'fastify/lib/plugin-utils.js', topLevel: true },
};
const rootRequire = createRequire(join(root, 'package.json'));
/** A package's file by its path inside node_modules (a package's exports may not list it). */
const packageFile = (path: string) => {
  const [scope, name, ...rest] = path.startsWith('@') ? path.split('/') : ['', ...path.split('/')];
  const pkg = scope ? `${scope}/${name}` : name!;
  return join(dirname(rootRequire.resolve(`${pkg}/package.json`)), ...rest);
};
/** The absolute path of each lazy entry's module, as esbuild resolves it from its importer. */
const lazyPaths = new Map(Object.entries(LAZY).map(([name, { spec, from }]) => [name, createRequire(from ? packageFile(from) : join(root, 'package.json')).resolve(spec)]));

/** `require('<spec>')` → `__rtLazy("<name>")` where the spec, resolved from `file`, is a lazy entry's module. */
function lazyRequires(source: string, file: string, own: boolean): string {
  const resolve = createRequire(file).resolve;
  return source.replace(/\brequire\((['"])([^'"]+)\1\)/g, (m, _q: string, spec: string) => {
    const name = Object.keys(LAZY).find((n) => LAZY[n]!.spec === spec || (own && !spec.startsWith('.') && resolve(spec) === lazyPaths.get(n)));
    if (name && resolve(spec) === lazyPaths.get(name)) {
      const load = `__rtLazy(${JSON.stringify(name)})`;
      return LAZY[name]!.topLevel ? onFirstRead(load) : load;
    }
    if (own && !spec.startsWith('.') && !spec.startsWith('node:')) throw new Error(`${file}: require('${spec}') on first use needs an entry in images/bundle.ts LAZY`);
    return m;
  });
}

/**
 * The sources load a module on first use through `const require = createRequire(import.meta.url);`:
 * without that line their `require` is the banner's, and each package they require that way is
 * one of the LAZY entries. node_modules files named in LAZY get the same for the requires listed.
 */
const lazyEntries: esbuild.Plugin = {
  name: 'lazy-entries',
  setup(build) {
    build.onResolve({ filter: /^rt-lazy:/ }, (args) => ({ path: args.path.slice('rt-lazy:'.length), namespace: 'rt-lazy' }));
    build.onLoad({ filter: /.*/, namespace: 'rt-lazy' }, (args) => ({ contents: `export default require(${JSON.stringify(lazyPaths.get(args.path))});`, loader: 'js', resolveDir: root }));
    const importers = new Set(Object.values(LAZY).flatMap((l) => (l.from ? [packageFile(l.from)] : [])));
    build.onLoad({ filter: /node_modules\/.*\.js$/ }, async (args) => {
      if (!importers.has(args.path)) return undefined;
      const source = await readFile(args.path, 'utf8');
      const out = lazyRequires(source, args.path, false);
      const expected = Object.values(LAZY).filter((l) => l.from && packageFile(l.from) === args.path).length;
      if ((out.match(/__rtLazy\(/g) ?? []).length < expected) throw new Error(`${args.path}: a require listed in images/bundle.ts LAZY was not found; it needs a look`);
      return { contents: out, loader: 'js' };
    });
  },
};

/** The sources' lazy requires (see lazyEntries): the createRequire line goes, the requires become `__rtLazy`. */
function ownLazyRequires(source: string, file: string): string {
  const line = /^const require = createRequire\(import\.meta\.url\);$/m;
  return line.test(source) ? lazyRequires(source.replace(line, ''), file, true) : source;
}

/**
 * Node's built-in modules through `require()`, not `import`: an ESM import of a built-in builds
 * its ESM facade, which reads every export, getters included, and `node:http`'s lazy getters
 * load Node's own copy of undici (~45 ms and several MB at start) that the sidecar never uses.
 */
const builtinsAsRequire: esbuild.Plugin = {
  name: 'builtins-as-require',
  setup(build) {
    const names = new Set(builtinModules);
    build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      if (args.kind !== 'import-statement' || !(args.path.startsWith('node:') || names.has(args.path))) return undefined;
      return { path: args.path, namespace: 'builtin-require' };
    });
    const require = createRequire(import.meta.url);
    build.onLoad({ filter: /.*/, namespace: 'builtin-require' }, (args) => {
      const id = JSON.stringify(args.path);
      if (!LAZY_BUILTINS.has(args.path.replace(/^node:/, ''))) return { contents: `module.exports = require(${id});`, loader: 'js' };
      // getters for the names the module has (read here, from the same Node), required at the first read
      const names = JSON.stringify(Object.keys(require(args.path) as object));
      return { contents: `let m;\nfor (const name of ${names}) Object.defineProperty(module.exports, name, { enumerable: true, get: () => (m ??= require(${id}))[name] });`, loader: 'js' };
    });
  },
};

/**
 * Built-ins that cost memory or time when they load (crypto and its OpenSSL-backed classes ~3 MB,
 * worker_threads, child_process, zlib, …) and that a sidecar may never use: an `import` of them in
 * the sources loads them at the first read of an export instead.
 */
const LAZY_BUILTINS = new Set(['crypto', 'fs/promises', 'child_process', 'worker_threads', 'zlib', 'dns', 'http2', 'https', 'tls', 'perf_hooks', 'assert', 'readline', 'sqlite', 'v8', 'vm', 'cluster', 'dgram', 'inspector']);

/**
 * @grpc/grpc-js on first use. It requires node:http2 and node:tls when it loads, ~10 MB of idle
 * RSS and ~40 ms of start, yet a sidecar that no gRPC client calls and that has no pluggable
 * component never uses it. The sources' `import * as grpc from '@grpc/grpc-js'` gets a module whose
 * exports (the names grpc-js has, read here at build time) are getters that require the real
 * package at their first read, but for its enums, copied; every other require of it shares that
 * one instance.
 */
const lazyGrpc: esbuild.Plugin = {
  name: 'lazy-grpc-js',
  setup(build) {
    const grpcJs = createRequire(join(root, 'package.json'))('@grpc/grpc-js') as Record<string, unknown>;
    // enums (status, connectivityState, …) are plain records of numbers and strings: copied here,
    // so code that reads them when it loads (a table of status codes) does not load grpc-js
    const isEnum = (v: unknown) => typeof v === 'object' && v !== null && Object.values(v).every((x) => typeof x === 'number' || typeof x === 'string');
    const enums = Object.fromEntries(Object.entries(grpcJs).filter(([, v]) => isEnum(v)));
    const names = Object.keys(grpcJs).filter((n) => !(n in enums));
    build.onResolve({ filter: /^@grpc\/grpc-js$/ }, (args) => (args.kind === 'import-statement' && !args.importer.includes('/node_modules/') ? { path: 'lazy', namespace: 'lazy-grpc-js' } : undefined));
    build.onLoad({ filter: /.*/, namespace: 'lazy-grpc-js' }, () => ({
      resolveDir: root,
      loader: 'js',
      contents: [
        'let grpc;',
        'const load = () => (grpc ??= __rtLazy("grpc-js"));',
        `for (const name of ${JSON.stringify(names)}) Object.defineProperty(module.exports, name, { enumerable: true, get: () => load()[name] });`,
        `Object.assign(module.exports, ${JSON.stringify(enums)});`,
      ].join('\n'),
    }));
  },
};

/**
 * undici's HTTP/2 client requires node:http2 when it loads, for a few header-name constants; rt
 * never opens an HTTP/2 connection through undici (allowH2 is off). The constants are taken from
 * node:http2 here, at build time, and http2 itself is required only by a connect.
 */
const undiciWithoutHttp2: esbuild.Plugin = {
  name: 'undici-without-http2',
  setup(build) {
    const require = createRequire(import.meta.url);
    const { constants } = require('node:http2') as typeof import('node:http2');
    build.onLoad({ filter: /undici\/lib\/dispatcher\/client-h2\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const eager = "http2 = require('node:http2')";
      if (!source.includes(eager)) throw new Error(`${args.path}: "${eager}" not found; images/bundle.ts undiciWithoutHttp2 needs a look`);
      const used = [...source.matchAll(/\b(HTTP2_HEADER_\w+|NGHTTP2_\w+)\b/g)].map((m) => m[1]!);
      const picked = Object.fromEntries(used.map((k) => [k, (constants as Record<string, unknown>)[k]]));
      const lazy = `http2 = { constants: ${JSON.stringify(picked)}, connect: (...args) => require('node:http2').connect(...args) }`;
      return { contents: source.replace(eager, lazy), loader: 'js' };
    });
  },
};

/**
 * Requires that dependencies make when they load, for what rt does not use or uses only when
 * configured, each made on its first use instead (the text as the file has it → its replacement).
 * Each is kept for a #15 target and pinned to the version it was checked against
 * (images/patched-dependencies.ts):
 * - fastify's server module requires node:https and node:http2 (and with them node:tls) for
 *   servers rt does not make;
 * - ioredis requires node:tls for a TLS connection to Redis, which only a component with enableTLS
 *   opens (~3 MB of RSS for a sidecar with a Redis state store);
 * - prom-client's Pushgateway, which rt does not use, requires node:https (and with it node:tls)
 *   and node:zlib when prom-client loads: ~4 MB of a sidecar's RSS with metrics on, the default.
 */
const DEPENDENCY_REQUIRES_ON_FIRST_USE: [RegExp, [string, string][]][] = [
  [
    /fastify\/lib\/server\.js$/,
    [
      ["require('node:https')", onFirstRead("require('node:https')")],
      ["require('node:http2')", onFirstRead("require('node:http2')")],
    ],
  ],
  [
    /prom-client\/lib\/pushgateway\.js$/,
    [
      ["require('https')", onFirstRead("require('https')")],
      ["const { gzipSync } = require('zlib');", "const gzipSync = (...args) => require('zlib').gzipSync(...args);"],
    ],
  ],
  [/ioredis\/built\/connectors\/(StandaloneConnector|SentinelConnector\/index)\.js$/, [['require("tls")', onFirstRead('require("tls")')]]],
];
const dependencyRequiresOnFirstUse: esbuild.Plugin = {
  name: 'dependency-requires-on-first-use',
  setup(build) {
    for (const [file, replacements] of DEPENDENCY_REQUIRES_ON_FIRST_USE) {
      build.onLoad({ filter: file }, async (args) => {
        let source = await readFile(args.path, 'utf8');
        for (const [eager, lazy] of replacements) {
          if (!source.includes(eager)) throw new Error(`${args.path}: ${eager} not found; images/bundle.ts DEPENDENCY_REQUIRES_ON_FIRST_USE needs a look`);
          source = source.replace(eager, lazy);
        }
        return { contents: source, loader: 'js' };
      });
    }
  },
};

/**
 * esbuild's code splitting gives the entry a static `import "../chunks/chunk-….js"` of the chunk
 * that holds its runtime helpers, although the entry uses none of them. Node resolves a static
 * import before the entry's first line runs, so before cli/rt.ts has set V8's start-up flags: that
 * resolution alone ran Node's path functions hot enough for Maglev to compile one, and its code
 * pages stayed in the idle sidecar's RSS (1.7 MB; bench/README.md `### startup`). Each such import
 * becomes a dynamic one, made where the entry first imports dynamically (after the flags).
 */
async function entryWithoutStaticChunkImports(file: string): Promise<void> {
  const source = await readFile(file, 'utf8');
  const bare = /\bimport\s*"(\.\.\/chunks\/[^"]+\.js)";/g;
  const chunks = [...source.matchAll(bare)].map((m) => m[1]!);
  let out = source.replace(bare, '');
  const at = out.indexOf('await import(');
  if (at < 0) throw new Error(`${file}: no dynamic import to put the chunk imports before; images/bundle.ts entryWithoutStaticChunkImports needs a look`);
  out = out.slice(0, at) + chunks.map((c) => `await import(${JSON.stringify(c)});`).join('') + out.slice(at);
  // what is left imported statically must be Node's own modules
  const relative = /\bimport\s*(?:[^'";]*?\bfrom\s*)?["']\.{1,2}\//.exec(out);
  if (relative) throw new Error(`${file}: a static import of a file is left (${out.slice(relative.index, relative.index + 80)}); images/bundle.ts entryWithoutStaticChunkImports needs a look`);
  await writeFile(file, out);
}

/**
 * The HTTP routes' validators compiled now, not at the sidecar's start: ajv's standalone code
 * (images/validators.ts) in place of sidecar/src/http/precompiled.ts.
 */
const precompiledValidators: esbuild.Plugin = {
  name: 'precompiled-validators',
  setup(build) {
    const file = join(root, 'sidecar', 'src', 'http', 'precompiled.ts');
    build.onLoad({ filter: /precompiled\.ts$/ }, (args) => (args.path === file ? { contents: precompiledModule(), loader: 'js', resolveDir: dirname(file) } : undefined));
  },
};

// read before the build, so that a file changed while it runs makes it stale (cli/compiled-build.ts)
const stamp: BuildStamp = { inputsMtimeMs: buildInputsMtime(root) };
await rm(dist, { recursive: true, force: true });
const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { 'cli/rt': 'cli/rt.ts', ...Object.fromEntries(Object.keys(LAZY).map((n) => [`lazy/${n}`, `rt-lazy:${n}`])) },
  outdir: dist,
  bundle: true,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  format: 'esm',
  platform: 'node',
  target: 'node22',
  external: EXTERNAL,
  plugins: [precompiledValidators, ownImportMeta, lazyEntries, builtinsAsRequire, lazyGrpc, undiciWithoutHttp2, dependencyRequiresOnFirstUse],
  // dependencies written in CommonJS call require(); and the helpers the plugin's code uses.
  // Every chunk sits one folder below dist/, as the entry does (dist/cli, dist/chunks).
  banner: {
    js: [
      "import { createRequire as __rtCreateRequire } from 'node:module';",
      "import { fileURLToPath as __rtFileURLToPath } from 'node:url';",
      'const require = __rtCreateRequire(import.meta.url);',
      "const __rtLazy = (name) => require('../lazy/' + name + '.js').default;",
      'const __rtFilename = (u) => __rtFileURLToPath(u);',
      "const __rtDirname = (u) => __rtFileURLToPath(new URL('.', u)).replace(/\\/$/, '');",
      'const __rtNamespace = (m) => { const d = m.default; const onlyDefault = Object.keys(m).length === 1 && d !== null && (typeof d === "object" || typeof d === "function"); return onlyDefault ? Object.assign(Object.create(null), d, { default: d }) : m; };',
    ].join('\n'),
  },
  // smaller source = less to parse at start and less held as the script's source string. The
  // identifiers stay as written, so functions and classes keep their own names without esbuild's
  // keepNames: that wraps every function made at run time in a defineProperty('name') call, 7% of a
  // busy sidecar's CPU (bench/README.md `### pluggable`); the same idle RSS either way.
  minifyWhitespace: !process.env.RT_NO_MINIFY,
  minifySyntax: !process.env.RT_NO_MINIFY,
  minifyIdentifiers: false,
  charset: 'ascii',
  legalComments: 'none',
  logLevel: 'warning',
  metafile: true,
});
await entryWithoutStaticChunkImports(join(dist, 'cli', 'rt.js'));
await writeFile(join(dist, BUILD_STAMP), JSON.stringify(stamp));
const outputs = Object.entries(result.metafile.outputs);
// module bodies compiled with their chunk, so that the compile cache holds them
// (eager-module-bodies.ts), and one view of a CommonJS module per exports object (memoized-to-esm.ts)
let toEsmHelpers = 0;
for (const [file] of outputs) {
  if (!file.endsWith('.js')) continue;
  const path = resolve(root, file);
  const toEsm = memoizedToEsm(eagerModuleBodies(await readFile(path, 'utf8')).source);
  if (toEsm.replaced) toEsmHelpers++;
  await writeFile(path, toEsm.source);
}
if (toEsmHelpers === 0) throw new Error("no esbuild __toESM helper found in the output; images/memoized-to-esm.ts's ESBUILD_TO_ESM needs a look");
const bytes = outputs.reduce((n, [, o]) => n + o.bytes, 0);
console.log(`${relative(root, dist) || dist}: ${outputs.length} bundle files, ${(bytes / 1048576).toFixed(1)} MB (entry cli/rt.js)`);
// RT_BUNDLE_META=<file>: esbuild's metafile, to see which packages the start-up chunks hold
if (process.env.RT_BUNDLE_META) await writeFile(process.env.RT_BUNDLE_META, JSON.stringify(result.metafile));
if (process.env.RT_BUNDLE_REPORT) {
  const byPkg = new Map<string, number>();
  for (const [file, o] of outputs) if (file.endsWith('cli/rt.js')) for (const [inp, v] of Object.entries(o.inputs)) { const m = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(inp); const k = m ? m[1] : inp.split('/').slice(0, 3).join('/'); byPkg.set(k, (byPkg.get(k) ?? 0) + v.bytesInOutput); }
  for (const [k, v] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(String(Math.round(v / 1024)).padStart(6), 'KB', k);
}
