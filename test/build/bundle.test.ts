/**
 * The build the rt image runs (`images/bundle.ts` + `images/dist-assets.ts`, built here into a
 * temp folder): the bundled `rt sidecar` serves the HTTP API, finds the .proto files beside the
 * bundle (gRPC runtime API, workflows' TaskHub), loads a component's SDK from its lazy chunk
 * (state.sqlite) and gets the named exports of a CommonJS package imported lazily (prom-client
 * for /metrics); cli/v8-flags.ts keeps V8's young generation small, RT_V8_FLAGS= turns it off;
 * the compile cache that images/rt/warm-compile-cache.ts fills is read by the next start.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CRDS_JSON, readCrdYaml } from '../../crds/validate.ts';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { freePort } from '../services/net.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('the bundled rt command (npm run build)', () => {
  const work = mkdtempSync(join(tmpdir(), 'rt-bundle-test-'));
  const out = join(work, 'dist');
  const resources = join(work, 'resources');
  const children: ChildProcess[] = [];
  let httpPort = 0;
  let grpcPort = 0;
  let metricsPort = 0;

  async function waitReady(proc: ChildProcess, port: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`rt exited with ${proc.exitCode}`);
      const ok = await fetch(`http://127.0.0.1:${port}/v1.0/healthz`).then((r) => r.status === 204, () => false);
      if (ok) return;
      if (Date.now() > deadline) throw new Error('the bundled sidecar did not answer healthz in 30 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  function start(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
    const proc = spawn(process.execPath, [join(out, 'cli', 'rt.js'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    children.push(proc);
    return proc;
  }

  beforeAll(async () => {
    for (const script of ['images/bundle.ts', 'images/dist-assets.ts']) {
      const r = spawnSync(process.execPath, [script, out], { cwd: ROOT, encoding: 'utf8' });
      expect(r.status, `${script}: ${r.stderr}`).toBe(0);
    }
    // the image has node_modules beside dist/; so does this temp build
    symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
    const warm = spawnSync(process.execPath, ['images/rt/warm-compile-cache.ts', out], { cwd: ROOT, encoding: 'utf8' });
    expect(warm.status, warm.stderr).toBe(0);
    mkdirSync(resources);
    writeFileSync(
      join(resources, 'state.yaml'),
      `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: store\nspec:\n  type: state.sqlite\n  version: v1\n  metadata:\n    - name: connectionString\n      value: "${join(work, 'state.db')}"\n`,
    );
    [httpPort, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const proc = start(['sidecar', '--app-id', 'bundled', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--metrics-port', String(metricsPort), '--resources-path', resources, '--data-dir', join(work, 'data'), '--log-level', 'warn']);
    await waitReady(proc, httpPort);
  }, 300_000); // the build: over 120 s beside load 16

  afterAll(async () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGKILL');
        await new Promise((r) => c.once('exit', r));
      }
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('serves state through a component loaded from its lazy chunk', async () => {
    const base = `http://127.0.0.1:${httpPort}/v1.0/state/store`;
    expect((await fetch(base, { method: 'POST', body: JSON.stringify([{ key: 'k', value: { n: 1 } }]) })).status).toBe(204);
    const got = await fetch(`${base}/k`);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual({ n: 1 });
  });

  it('serves the gRPC runtime API from the protos copied beside the bundle', async () => {
    const Client = runtimeClient();
    const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      GetMetadata(req: object, cb: (err: grpc.ServiceError | null, res?: { id: string; registered_components: { name: string }[] }) => void): void;
    };
    try {
      const meta = await new Promise<{ id: string; registered_components: { name: string }[] }>((resolve, reject) => client.GetMetadata({}, (err, res) => (err ? reject(err) : resolve(res!))));
      expect(meta.id).toBe('bundled');
      expect(meta.registered_components.map((c) => c.name)).toContain('store');
    } finally {
      client.close();
    }
  });

  it('serves Prometheus metrics (prom-client, a CommonJS package imported lazily)', async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^rt_process_cpu_user_seconds_total\{app_id="bundled"\} /m);
  });

  it("keeps the sources' names without esbuild's keepNames helper, which costs a defineProperty per closure made", () => {
    const chunks = readdirSync(join(out, 'chunks')).map((f) => readFileSync(join(out, 'chunks', f), 'utf8'));
    // `X=class …` is named X by the language itself, as `class X` is
    expect(chunks.some((c) => /\b(class PluggableStateStore|PluggableStateStore=class)\b/.test(c))).toBe(true);
    expect(chunks.filter((c) => /\b__name\(/.test(c))).toEqual([]);
  });

  it('prints its version from the package.json written beside the bundle', () => {
    const r = spawnSync(process.execPath, [join(out, 'cli', 'rt.js'), '--version'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^rt \d+\.\d+\.\d+ \(node v24\./);
  });

  it('does not load http2, https, tls or the modules of dist/lazy/ while no gRPC client or HTTPS peer is in use (grpc-js loads on first use)', async () => {
    const list = join(work, 'modules.txt');
    const preload = join(work, 'module-list.cjs');
    // Node's list of the built-in modules it loaded and the files it imported, written as the process exits
    writeFileSync(
      preload,
      `const files = [];
      require('node:module').registerHooks({ load: (url, context, next) => (files.push(url), next(url, context)) });
      process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(list)}, [...process.moduleLoadList, ...files].join('\\n')));`,
    );
    const [port, metrics] = [await freePort(), await freePort()];
    // metrics on, as by default: prom-client's Pushgateway would load https and tls
    const proc = spawn(process.execPath, ['-r', preload, join(out, 'cli', 'rt.js'), 'sidecar', '--app-id', 'idle', '--http-port', String(port), '--grpc-port', String(await freePort()), '--metrics-port', String(metrics), '--data-dir', join(work, 'idle-data'), '--log-level', 'warn'], { stdio: 'ignore' });
    children.push(proc);
    await waitReady(proc, port);
    expect((await fetch(`http://127.0.0.1:${port}/v1.0/metadata`)).status).toBe(200);
    expect(await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text()).toContain('rt_http_server_request_duration_seconds');
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    const loaded = readFileSync(list, 'utf8').split('\n');
    expect(loaded).toContain('NativeModule http');
    expect(loaded.filter((m) => /^NativeModule (http2|https|tls|zlib)$/.test(m))).toEqual([]);
    expect(loaded.some((m) => m.endsWith('/cli/rt.js'))).toBe(true);
    // pino-pretty (text logs: none at warn while all is well), CEL, yaml, protobufjs, grpc-js,
    // fastify's schema compilers and undici's parsers (the metadata call made no request through
    // undici) wait for their first use
    expect(loaded.filter((m) => m.includes('/lazy/')).map((m) => m.replace(/^.*\/lazy\//, ''))).toEqual([]);
    expect(loaded).not.toContain('NativeModule tty');
    // nor node:crypto (the embedded scheduler's store name is hashed with @noble/hashes) and
    // node:fs/promises (the socket folder is listed with node:fs)
    expect(loaded.filter((m) => /^NativeModule (crypto|fs\/promises)$/.test(m))).toEqual([]);
  });

  it('sets V8\'s start-up flags before Node resolves any chunk: nothing is optimized while it starts', () => {
    // the entry imports no file statically (images/bundle.ts entryWithoutStaticChunkImports), so no
    // resolution runs before its first line; --trace-opt prints each function Maglev or TurboFan
    // compiles. Imported from -e: Node's own resolution of a main file from a path as long as this
    // temp folder's compiles one function before any line of it runs (from /app/dist, the image's, none)
    expect(readFileSync(join(out, 'cli', 'rt.js'), 'utf8')).not.toMatch(/\bimport\s*["']\.\.\//);
    const { RT_V8_FLAGS: _, ...env } = process.env;
    const run = (e: NodeJS.ProcessEnv) => spawnSync(process.execPath, ['--trace-opt', '--input-type=module', '-e', `await import(${JSON.stringify(join(out, 'cli', 'rt.js'))})`, 'rt', 'version'], { encoding: 'utf8', env: e });
    const r = run(env);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.split('\n').filter((l) => l.includes('compiling method'))).toEqual([]);
    // without the flags the same start compiles (the check can fail)
    expect(run({ ...env, RT_V8_FLAGS: '' }).stdout).toMatch(/compiling method/);
  });

  it("loads the built-in modules it starts with before it sets V8's flags, so that they are not compiled from source (cli/v8-flags.ts)", async () => {
    // Node's own debug output says, per built-in, whether V8 accepted its code cache; any flag set
    // before a built-in loads makes V8 reject it
    const port = await freePort();
    const proc = start(['sidecar', '--app-id', 'builtins', '--http-port', String(port), '--grpc-port', String(await freePort()), '--disable-metrics', '--data-dir', join(work, 'builtins-data'), '--log-level', 'warn'], { NODE_DEBUG_NATIVE: 'CODE_CACHE' });
    let err = '';
    proc.stderr?.on('data', (c: Buffer) => (err += c));
    await waitReady(proc, port);
    const atReady = err;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    expect(atReady).toMatch(/Code cache of http \S+ is accepted/);
    expect(atReady).toMatch(/Code cache of cluster \S+ is accepted/);
    // compiled from source: only the few small ones left for after the flags (cli/v8-flags.ts says why)
    const fromSource = atReady.split('\n').flatMap((l) => /^Code cache of (\S+) \S+ is rejected/.exec(l)?.[1] ?? []);
    const leftForLater = /^(dns|internal\/dns\/callback_resolver|internal\/fs\/dir|internal\/util\/(diff|trace_sigint|parse_args\/\w+))$/;
    expect(fromSource.filter((m) => !leftForLater.test(m))).toEqual([]);
    // the same start with the flags set first compiles them from source (the check can fail)
    const flagsFirst = spawnSync(process.execPath, ['--no-maglev', join(out, 'cli', 'rt.js'), '--version'], { encoding: 'utf8', env: { ...process.env, NODE_DEBUG_NATIVE: 'CODE_CACHE' } });
    expect(flagsFirst.stderr).toMatch(/Code cache of \S+ \S+ is rejected/);
  });

  it('compiles the bundled CommonJS modules with their chunk, so that their bodies are in the compile cache (images/eager-module-bodies.ts)', () => {
    const files = ['chunks', 'lazy'].flatMap((d) => readdirSync(join(out, d)).map((f) => join(out, d, f)));
    const bodies = files.map((f) => readFileSync(f, 'utf8')).join('\n');
    // esbuild's method form, compiled by V8 at the first call and so never cached
    expect(bodies.match(/__(commonJS|esm)\(\{"[^"]+"\(/g) ?? []).toEqual([]);
    expect((bodies.match(/__commonJS\(\{"[^"]+":\(function\(/g) ?? []).length).toBeGreaterThan(100);
  });

  it('builds each module loaded on first use as an entry of its own that gives the module (images/bundle.ts LAZY)', () => {
    const entries = readdirSync(join(out, 'lazy'));
    expect(entries.length).toBeGreaterThanOrEqual(10);
    const script = `for (const f of ${JSON.stringify(entries)}) { const m = require(${JSON.stringify(join(out, 'lazy'))} + '/' + f).default; if (m === null || (typeof m !== 'object' && typeof m !== 'function')) throw new Error(f + ': ' + typeof m); console.log(f, Object.keys(m).length); }`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const got = Object.fromEntries(r.stdout.trim().split('\n').map((l) => l.split(' ')));
    expect(Object.keys(got).sort()).toEqual([...entries].sort());
    expect(Number(got['grpc-js.js'])).toBeGreaterThan(20);
    expect(Number(got['cel.js'])).toBeGreaterThan(5);
  });

  it('checks resource files against the CRDs the build wrote as JSON', () => {
    const built = JSON.parse(readFileSync(join(out, 'crds', CRDS_JSON), 'utf8')) as unknown;
    expect(built).toEqual(readCrdYaml());
    const bad = join(work, 'bad-resources');
    mkdirSync(bad);
    writeFileSync(join(bad, 'c.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: s\nspec:\n  type: bindings.eventgrid\n  version: v1\n  metadata:\n  - name: handshakePort\n    value: 8080\n');
    const r = spawnSync(process.execPath, [join(out, 'cli', 'rt.js'), 'sidecar', '--app-id', 'bad', '--http-port', '0', '--grpc-port', '0', '--resources-path', bad, '--data-dir', join(work, 'bad-data')], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('spec.metadata[0].value: handshakePort must be a quoted string');
  });

  it('compiles its modules from the compile cache the build filled (cli/compile-cache.ts)', () => {
    const r = spawnSync(process.execPath, [join(out, 'cli', 'rt.js'), '--version'], { encoding: 'utf8', env: { ...process.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`resolved path ${join(out, '.compile-cache')}`);
    // the command's own chunk, and nothing compiled afresh
    expect(r.stderr).toMatch(/V8 code cache for ESM file:\/\/\S+\/chunks\/main-\w+\.js was accepted/);
    expect(r.stderr).not.toMatch(/was rejected|was not initialized|no such file/);
    const off = spawnSync(process.execPath, [join(out, 'cli', 'rt.js'), '--version'], { encoding: 'utf8', env: { ...process.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', NODE_DISABLE_COMPILE_CACHE: '1' } });
    expect(off.status).toBe(0);
    expect(off.stderr).not.toContain('was accepted');
  });

  it('finds the component types\' chunks and clients in the compile cache too (the build starts a sidecar with one of each)', async () => {
    const res = join(work, 'warm-check');
    mkdirSync(res);
    const component = (name: string, type: string, md: string) =>
      `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  ignoreErrors: true\n  metadata: [${md}]\n`;
    writeFileSync(
      join(res, 'c.yaml'),
      [
        component('r', 'state.redis', '{ name: redisHost, value: "127.0.0.1:1" }'),
        component('p', 'state.postgresql', '{ name: connectionString, value: "postgres://x@127.0.0.1:1/x" }'),
        component('s', 'bindings.sftp', '{ name: address, value: "127.0.0.1:1" }, { name: username, value: x }, { name: password, value: x }, { name: rootPath, value: / }, { name: insecureIgnoreHostKey, value: "true" }'),
      ].join('---\n'),
    );
    const port = await freePort();
    const proc = spawn(process.execPath, [join(out, 'cli', 'rt.js'), 'sidecar', '--app-id', 'warm-check', '--http-port', String(port), '--grpc-port', String(await freePort()), '--metrics-port', String(await freePort()), '--resources-path', res, '--data-dir', join(work, 'warm-check-data'), '--log-level', 'info'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' },
    });
    children.push(proc);
    let err = '';
    proc.stderr?.on('data', (c: Buffer) => (err += c));
    await waitReady(proc, port);
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    expect(err).toMatch(/V8 code cache for ESM file:\/\/\S+\/chunks\/redis-\w+\.js was accepted/);
    // the readable output's pino-pretty, loaded at the first line at info
    expect(err).toMatch(/V8 code cache for \S+ \S+\/lazy\/pino-pretty\.js was accepted/);
    // a module missing from the cache is compiled and written at exit
    expect(err.split('\n').filter((l) => l.includes('writing cache for'))).toEqual([]);
    // nor compiled under other V8 flags than the warm start's (cli/memory-reducer.ts untilStartupOver)
    expect(err.split('\n').filter((l) => l.includes('was rejected'))).toEqual([]);
  });

  it('keeps the young generation small (cli/v8-flags.ts); RT_V8_FLAGS= leaves V8 its defaults', () => {
    // the bundle runs first (`rt version`), then a burst of short-lived objects, as a busy sidecar makes
    const youngMb = (env: NodeJS.ProcessEnv) => {
      const script = `await import(${JSON.stringify(join(out, 'cli', 'rt.js'))});
        const v8 = await import('node:v8');
        const ring = new Array(200000);
        for (let i = 0; i < 3e6; i++) ring[i % ring.length] = { i, s: 'x' + i };
        console.log(v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576);`;
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, 'rt', 'version'], { encoding: 'utf8', env: { ...process.env, ...env } });
      expect(r.status, r.stderr).toBe(0);
      return Number(r.stdout.trim().split('\n').at(-1));
    };
    expect(youngMb({})).toBeLessThanOrEqual(16);
    expect(youngMb({ RT_V8_FLAGS: '' })).toBeGreaterThan(32);
  });
});
