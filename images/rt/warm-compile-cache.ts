/**
 * Fills the compile cache of a build (cli/compile-cache.ts): starts `rt sidecar` from it, waits for
 * healthz, and stops it, twice (without components, then with one of each type that has a client
 * SDK); Node writes the compiled code of every module it loaded at exit. The
 * third step of `npm run build`, and run once more in the image as its own user (the cache is kept
 * per user, and the image's root filesystem is read-only at run time, so it is filled when built).
 *
 *   node images/rt/warm-compile-cache.ts [dist]      (default: dist/ beside images/)
 *
 * Plain TypeScript with node: imports only, since the image runs it with nothing but node and dist/.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const dist = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'dist'));

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
}

/**
 * The second start's resources: one component of each built-in type whose SDK loads on first use,
 * pointed at a closed loopback port with ignoreErrors, so its chunk and client load, fail fast and
 * are cached too: a sidecar with components then compiles none of them at start (in the image the
 * cache is read-only at run time, so what is not cached here is compiled on every start).
 */
const COMPONENTS = [
  ['state.sqlite', [['connectionString', 'warm.sqlite']]],
  ['state.redis', [['redisHost', '127.0.0.1:1']]],
  ['state.postgresql', [['connectionString', 'postgres://warm@127.0.0.1:1/warm']]],
  ['pubsub.redis', [['redisHost', '127.0.0.1:1']]],
  ['pubsub.in-memory', []],
  ['bindings.sftp', [['address', '127.0.0.1:1'], ['username', 'warm'], ['password', 'warm'], ['rootPath', '/'], ['insecureIgnoreHostKey', 'true']]],
] as const;

function resourcesYaml(): string {
  return COMPONENTS.map(([type, md]) =>
    [
      'apiVersion: rt.io/v1alpha1',
      'kind: Component',
      `metadata: { name: warm-${type.replace('.', '-')} }`,
      'spec:',
      `  type: ${type}`,
      '  version: v1',
      '  ignoreErrors: true',
      '  initTimeout: 5s',
      `  metadata: [${md.map(([k, v]) => `{ name: ${k}, value: "${v}" }`).join(', ')}]`,
    ].join('\n'),
  ).join('\n---\n');
}

/** Starts `rt sidecar` from the build, waits for healthz and stops it; Node writes the cache at exit. */
async function startOnce(extra: string[], logLevel: string): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), 'rt-warm-'));
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  // metrics on, as by default: prom-client's chunk is cached too
  const args = ['sidecar', '--app-id', 'warm', '--http-port', String(http), '--grpc-port', String(grpc), '--metrics-port', String(metrics), '--data-dir', data, '--log-level', logLevel, ...extra];
  // RT_HOME: its registry entry and socket go to the temp folder too, not to ~/.rt
  const child = spawn(process.execPath, [join(dist, 'cli', 'rt.js'), ...args], { cwd: data, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, RT_HOME: data } });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`rt sidecar exited with ${child.exitCode} before it was ready`);
      const ready = await fetch(`http://127.0.0.1:${http}/v1.0/healthz`).then((r) => r.status === 204, () => false);
      if (ready) break;
      if (Date.now() > deadline) throw new Error('rt sidecar not ready in 60 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) throw new Error(`rt sidecar exited with ${code} at SIGTERM`);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(data, { recursive: true, force: true });
  }
}

// first as most sidecars start (no components), then with the component types' chunks, at info:
// the readable output's pino-pretty loads at the first line (stdout is ignored here)
await startOnce([], 'error');
const resources = mkdtempSync(join(tmpdir(), 'rt-warm-resources-'));
try {
  writeFileSync(join(resources, 'components.yaml'), resourcesYaml());
  await startOnce(['--resources-path', resources], 'info');
} finally {
  rmSync(resources, { recursive: true, force: true });
}
console.log(`${dist}: compile cache filled`);
