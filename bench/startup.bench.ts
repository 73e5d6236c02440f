/**
 * The sidecar tax at start (issue 15): process start → `/v1.0/healthz` 204 (median of ROUNDS,
 * default 10) and idle RSS (IDLE_MS after ready), for
 * - the compiled build (`node dist/cli/rt.js`: the esbuild bundle of `npm run build`, what the rt
 *   image runs) with no components, and with a SQLite state store + a Redis state store + an SFTP
 *   output binding;
 * - the same with the glibc malloc settings the image sets (its Dockerfile's GLIBC_TUNABLES), with
 *   V8's default heap settings (`RT_V8_FLAGS=`), to show what cli/v8-flags.ts buys, and without the
 *   compile cache the build fills (cli/compile-cache.ts), a first start's cost;
 * - the TypeScript sources through the `rt` bin (`node cli/bin/rt.js` with RT_FROM_SOURCES=1, what
 *   `npm start` and `npx rt` run without an up-to-date build; type stripping unless the checkout's
 *   compile cache has the files), and the same bin beside an up-to-date build (it runs dist/,
 *   cli/compiled-build.ts);
 * - the sidecar from a Node startup snapshot (bench/startup-snapshot.ts: an experiment, not how rt
 *   runs; docs/ARCHITECTURE.md "Dependencies as published").
 * Anchor, in the same run: bare `node -e` that opens an HTTP port and answers 204. RSS counts the
 * node binary's pages a process has mapped, and the kernel maps, with each page it faults in, those
 * around it that are already in the page cache: the rounds interleave the variants, and after the
 * run with components (more of the binary read: OpenSSL, SQLite) the rows without them measure
 * ~1.7 MB more than when they run only beside the anchor (bench/README.md `### startup`).
 * The build is made from the current sources into a temp folder first (bench/lib.ts buildRt). Redis comes
 * from RT_TEST_REDIS_URL (npm run bench starts one), sshd from test/services/sshd.ts.
 * BENCH_IMAGE=1 adds the rt image's start time and RSS (docs/kubernetes.md quotes them).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRt, machineLine, printTable, ratio, rssMb, shortTempDir, type Row } from './lib.ts';
import { buildSnapshot } from './startup-snapshot.ts';
import { BUILD_INPUTS, BUILD_STAMP, buildInputsMtime } from '../cli/compiled-build.ts';
import { freePort } from '../test/services/net.ts';
import { startSharedServices } from '../test/services/shared-services.ts';
import { startSshd } from '../test/services/sshd.ts';

const ROOT = join(import.meta.dirname, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const IDLE_MS = 2000;

interface Sample {
  readyMs: number;
  rssMb: number;
}

interface Variant {
  argv: (port: number, dataDir: string) => Promise<string[]>;
  env?: NodeJS.ProcessEnv;
  /** Another program than this node (the docker CLI for the image rows). */
  cmd?: string;
  /** The pid whose RSS counts, once ready (a container's process); default the child's. */
  pid?: (child: ChildProcess) => Promise<number>;
  /** Stops what the child started (a container); default SIGTERM to the child. */
  stop?: (child: ChildProcess) => Promise<void>;
}

async function once(v: Variant): Promise<Sample> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rt-bench-startup-'));
  const port = await freePort();
  const argv = await v.argv(port, dataDir);
  const t0 = performance.now();
  const proc: ChildProcess = spawn(v.cmd ?? process.execPath, argv, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...v.env } });
  try {
    const url = `http://127.0.0.1:${port}/v1.0/healthz`;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`${argv.join(' ')} exited with ${proc.exitCode}`);
      try {
        if ((await fetch(url)).status === 204) break;
      } catch {
        // not listening yet
      }
      if (performance.now() - t0 > 30_000) throw new Error(`${url} not ready after 30 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
    const readyMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return { readyMs, rssMb: rssMb(v.pid ? await v.pid(proc) : proc.pid!) };
  } finally {
    if (v.stop) await v.stop(proc);
    proc.kill('SIGTERM');
    if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Rounds interleaved across the variants, so a burst of load on the machine hits them alike. */
async function measureAll(variants: Record<string, Variant>): Promise<Record<string, Sample>> {
  const samples: Record<string, Sample[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let i = 0; i < ROUNDS; i++) for (const [k, v] of Object.entries(variants)) samples[k]!.push(await once(v));
  return Object.fromEntries(Object.entries(samples).map(([k, s]) => [k, { readyMs: median(s.map((x) => x.readyMs)), rssMb: median(s.map((x) => x.rssMb)) }]));
}

/**
 * BENCH_IMAGE=1: the rt image (rt:dev, built when stale) as a pod runs it, read-only root, on the
 * host network: `docker run` → healthz, and the container process's RSS; anchor: the same
 * image's node running the bare HTTP server (both include docker's container start).
 */
async function imageRows(): Promise<void> {
  const { startDocker } = await import('../test/services/docker.ts');
  const { buildImages } = await import('../test/services/images.ts');
  const d = await startDocker();
  try {
    const { rt } = await buildImages(d, { log: () => undefined });
    let n = 0;
    const container = (args: (port: number) => Promise<string[]>): Variant => {
      const name = `rt-bench-startup-${process.pid}-${n++}`;
      return {
        cmd: '/usr/bin/docker',
        env: { DOCKER_HOST: d.host },
        argv: async (port) => ['run', '--rm', '--name', name, '--network', 'host', '--read-only', ...(await args(port))],
        pid: async () => Number((await d.docker(['inspect', '--format', '{{.State.Pid}}', name], { check: true })).stdout.trim()),
        stop: async () => void (await d.docker(['rm', '-f', name])),
      };
    };
    const r = await measureAll({
      anchor: container(async (port) => ['--entrypoint', 'node', rt, '-e', `require('http').createServer((q, s) => { s.statusCode = 204; s.end(); }).listen(${port}, '127.0.0.1')`]),
      image: container(async (port) => [rt, 'sidecar', '--app-id', 'bench', '--http-port', String(port), '--grpc-port', String(await freePort()), '--disable-metrics', '--log-level', 'warn']),
    });
    printTable(`the rt image (${rt}): docker run → healthz, median of ${ROUNDS}; anchor = the image's node -e opening a port`, [
      { process: 'anchor: docker run … node -e, HTTP 204', 'start → healthz ms': r.anchor!.readyMs, 'idle RSS MB': r.anchor!.rssMb.toFixed(1), 'vs anchor (time)': '1.00×', 'vs anchor (RSS)': '1.00×' },
      { process: 'docker run rt:dev sidecar, no components', 'start → healthz ms': r.image!.readyMs, 'idle RSS MB': r.image!.rssMb.toFixed(1), 'vs anchor (time)': ratio(r.image!.readyMs, r.anchor!.readyMs), 'vs anchor (RSS)': ratio(r.image!.rssMb, r.anchor!.rssMb) },
    ]);
  } finally {
    await d.stop();
  }
}

const sidecarArgs = async (port: number, dataDir: string) => [
  'sidecar', '--app-id', 'bench', '--http-port', String(port), '--grpc-port', String(await freePort()),
  '--disable-metrics', '--data-dir', dataDir, '--log-level', 'warn',
];

// the glibc malloc settings the image's Dockerfile sets, for a row that runs the build with them
const IMAGE_GLIBC_TUNABLES = /^ENV GLIBC_TUNABLES=(\S+)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? '';
if (!IMAGE_GLIBC_TUNABLES) throw new Error('Dockerfile: no ENV GLIBC_TUNABLES line');
const buildDir = shortTempDir();
const RT = buildRt(buildDir);
// a checkout beside the build, for the bin's row: the sources the build was made from, and the
// build's stamp taken from them (cli/compiled-build.ts)
for (const p of BUILD_INPUTS) if (!p.startsWith('node_modules') && existsSync(join(ROOT, p))) cpSync(join(ROOT, p), join(buildDir, p), { recursive: true });
writeFileSync(join(buildDir, 'dist', BUILD_STAMP), JSON.stringify({ inputsMtimeMs: buildInputsMtime(buildDir) }));
const snapshot = await buildSnapshot(buildDir);

console.log(machineLine());
const services = await startSharedServices({ quiet: true });
const sshd = await startSshd();
const resources = mkdtempSync(join(tmpdir(), 'rt-bench-startup-res-'));
try {
  const redis = new URL(process.env.RT_TEST_REDIS_URL!);
  const component = (name: string, type: string, metadata: Record<string, string>) =>
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: ${type}\n  version: v1\n  metadata:\n${Object.entries(metadata)
      .map(([k, v]) => `    - { name: ${k}, value: ${JSON.stringify(v)} }`)
      .join('\n')}\n`;
  writeFileSync(join(resources, 'sqlite.yaml'), component('sqlite', 'state.sqlite', { connectionString: '{env:RT_BENCH_DATA}/state.db' }));
  writeFileSync(join(resources, 'redis.yaml'), component('redis', 'state.redis', { redisHost: redis.host, ...(redis.password ? { redisPassword: decodeURIComponent(redis.password) } : {}) }));
  writeFileSync(
    join(resources, 'sftp.yaml'),
    component('files', 'bindings.sftp', { rootPath: sshd.root, address: sshd.address, username: sshd.username, privateKey: sshd.keys.ed25519.path, knownHostsFile: sshd.knownHostsFile }),
  );
  const withComponents: Variant = {
    argv: async (port, dataDir) => {
      process.env.RT_BENCH_DATA = dataDir;
      return [RT, ...(await sidecarArgs(port, dataDir)), '--resources-path', resources];
    },
  };

  const r = await measureAll({
    anchor: { argv: async (port) => ['-e', `require('http').createServer((q, s) => { s.statusCode = 204; s.end(); }).listen(${port}, '127.0.0.1')`] },
    compiled: { argv: async (port, dataDir) => [RT, ...(await sidecarArgs(port, dataDir))] },
    components: withComponents,
    malloc: { argv: async (port, dataDir) => [RT, ...(await sidecarArgs(port, dataDir))], env: { GLIBC_TUNABLES: IMAGE_GLIBC_TUNABLES } },
    v8defaults: { argv: async (port, dataDir) => [RT, ...(await sidecarArgs(port, dataDir))], env: { RT_V8_FLAGS: '' } },
    nocache: { argv: async (port, dataDir) => [RT, ...(await sidecarArgs(port, dataDir))], env: { NODE_DISABLE_COMPILE_CACHE: '1' } },
    ...('blob' in snapshot ? { snapshot: { argv: async (port: number, dataDir: string) => ['--snapshot-blob', snapshot.blob, ...(await sidecarArgs(port, dataDir))] } } : {}),
    bin: { argv: async (port, dataDir) => [join(buildDir, 'cli', 'bin', 'rt.js'), ...(await sidecarArgs(port, dataDir))] },
    sources: { argv: async (port, dataDir) => ['cli/bin/rt.js', ...(await sidecarArgs(port, dataDir))], env: { RT_FROM_SOURCES: '1' } },
  });
  const anchor = r.anchor!;
  const row = (name: string, s: Sample, target: string): Row => ({
    process: name,
    'start → healthz ms': s.readyMs,
    'idle RSS MB': s.rssMb.toFixed(1),
    'vs anchor (time)': ratio(s.readyMs, anchor.readyMs),
    'vs anchor (RSS)': ratio(s.rssMb, anchor.rssMb),
    target,
  });
  printTable(`sidecar start, median of ${ROUNDS} (RSS ${IDLE_MS / 1000} s after ready); anchor = bare node -e opening a port`, [
    row('anchor: node -e, HTTP 204', anchor, ''),
    row('rt sidecar compiled (node dist/cli/rt.js), no components', r.compiled!, '≤ 250 ms, ≤ 60 MB'),
    row('rt sidecar compiled, sqlite + redis state + sftp binding', r.components!, '≤ 75 MB'),
    row("rt sidecar compiled, no components, the image's malloc thresholds (GLIBC_TUNABLES)", r.malloc!, '≤ 60 MB'),
    row('rt sidecar compiled, V8 default heap (RT_V8_FLAGS=)', r.v8defaults!, ''),
    row('rt sidecar compiled, no compile cache (NODE_DISABLE_COMPILE_CACHE=1)', r.nocache!, ''),
    ...(r.snapshot ? [row('rt sidecar from a startup snapshot (node --snapshot-blob, bench/startup-snapshot.ts; an experiment), no components', r.snapshot, '≤ 100 ms, ≤ 60 MB')] : []),
    row('rt on PATH (node cli/bin/rt.js, as npm start and npx rt run it) beside an up-to-date build, no components', r.bin!, ''),
    row('rt sidecar from sources (node cli/bin/rt.js, RT_FROM_SOURCES=1: npm start and npx rt without a build), no components', r.sources!, ''),
  ]);
  if ('error' in snapshot) console.log(`no startup snapshot row: ${snapshot.error}`);
  if (process.env.BENCH_IMAGE === '1') await imageRows();
} finally {
  rmSync(resources, { recursive: true, force: true });
  rmSync(buildDir, { recursive: true, force: true });
  await sshd.close();
  await services.stop();
}
