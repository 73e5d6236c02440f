/**
 * Fills the compile cache of a build (cli/compile-cache.ts): starts `rt sidecar` from it once, waits
 * for healthz, and stops it; Node writes the compiled code of every module it loaded at exit. The
 * third step of `npm run build`, and run once more in the image as its own user (the cache is kept
 * per user, and the image's root filesystem is read-only at run time, so it is filled when built).
 *
 *   node images/rt/warm-compile-cache.ts [dist]      (default: dist/ beside images/)
 *
 * Plain TypeScript with node: imports only, since the image runs it with nothing but node and dist/.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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

const data = mkdtempSync(join(tmpdir(), 'rt-warm-'));
const [http, grpc] = [await freePort(), await freePort()];
const args = ['sidecar', '--app-id', 'warm', '--http-port', String(http), '--grpc-port', String(grpc), '--disable-metrics', '--data-dir', data, '--log-level', 'warn'];
const child = spawn(process.execPath, [join(dist, 'cli', 'rt.js'), ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
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
  console.log(`${dist}: compile cache filled`);
} finally {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(data, { recursive: true, force: true });
}
