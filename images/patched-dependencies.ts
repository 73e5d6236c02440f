/**
 * What `npm run build` (images/bundle.ts) and the `rt` command rely on beyond what their
 * dependencies publish, at the version each was measured and checked against. Each entry is kept
 * only because a #15 target (bench/README.md's table: idle RSS ≤ 60 MB for the image, start →
 * healthz ≤ 250 ms compiled) would be missed without it; docs/ARCHITECTURE.md "Dependencies as
 * published" gives the figures. test/build/patched-dependencies.test.ts fails when an installed
 * version differs: then read the files named here in the new version, check that the rewrite still
 * means what it meant (the build also stops when a rewritten text is gone), run `npm run bench --
 * startup`, and update the version or drop the entry.
 */

export interface Patched {
  /** The version in the package's package.json (for `node`: V8's major.minor, process.versions.v8). */
  version: string;
  /** What is relied on, and where in the repo. */
  what: string;
}

export const PATCHED_DEPENDENCIES: Record<string, Patched> = {
  undici: {
    version: '8.12.4',
    what: 'images/bundle.ts: lib/dispatcher/client-h1.js and parser-h1.js require their llhttp/milo parsers on first use (LAZY); client-h2.js takes the http2 constants at build time and requires node:http2 only on connect (undiciWithoutHttp2)',
  },
  fastify: {
    version: '5.12.8',
    what: 'images/bundle.ts: lib/schema-controller.js requires its schema compilers, and lib/plugin-utils.js semver, on first use (LAZY); lib/server.js requires node:https and node:http2 on first use (DEPENDENCY_REQUIRES_ON_FIRST_USE)',
  },
  'prom-client': {
    version: '15.1.3',
    what: "images/bundle.ts: lib/pushgateway.js requires node:https and zlib's gzipSync on first use (DEPENDENCY_REQUIRES_ON_FIRST_USE)",
  },
  ioredis: {
    version: '6.0.0',
    what: 'images/bundle.ts: built/connectors/StandaloneConnector.js and SentinelConnector/index.js require node:tls on first use (DEPENDENCY_REQUIRES_ON_FIRST_USE)',
  },
  esbuild: {
    version: '0.28.2',
    what: "images/memoized-to-esm.ts: esbuild's minified __toESM helper, found by its text and memoized",
  },
  node: {
    version: '13.6',
    what: "cli/v8-flags.ts and cli/memory-reducer.ts: V8 flags set and reset at run time (--semi-space-growth-factor, --no-maglev/--no-turbofan, --bytecode-old-age), and V8's gc() with its options, from a vm context made while --expose-gc is on",
  },
};
