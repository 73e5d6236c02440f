/** The ssh2 library is loaded only by a sidecar that has a bindings.sftp component. */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { sshdAvailable } from './helpers.ts';

const run = promisify(execFile);
const sidecarModule = resolve('sidecar/src/sidecar.ts');

/** Starts a sidecar in a fresh Node process and answers whether ssh2 got loaded. */
async function loadsSsh2(resources: string[]): Promise<boolean> {
  const script = `
    import { createRequire } from 'node:module';
    import pino from 'pino';
    import { startSidecar } from ${JSON.stringify(sidecarModule)};
    const s = await startSidecar({ appId: 'lazy', httpPort: 0, grpcPort: 0, resourcesPaths: ${JSON.stringify(resources)}, logger: pino({ level: 'silent' }) });
    const cache = createRequire(import.meta.url)('module')._cache;
    console.log(JSON.stringify(Object.keys(cache).some((k) => k.includes('/node_modules/ssh2/'))));
    await s.close();
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: resolve('.') });
  return JSON.parse(stdout.trim().split('\n').pop()!) as boolean;
}

describe.skipIf(!sshdAvailable)('bindings.sftp loads ssh2 lazily', () => {
  let s: SshdServer;
  let dir: string;
  beforeAll(async () => {
    s = await startSshd();
    dir = await mkdtemp(join(tmpdir(), 'rt-sftp-lazy-'));
    await writeFile(
      join(dir, 'files.yaml'),
      `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: files\nspec:\n  type: bindings.sftp\n  version: v1\n  metadata:\n    - { name: rootPath, value: "${s.root}" }\n    - { name: address, value: "${s.address}" }\n    - { name: username, value: "${s.username}" }\n    - { name: password, value: "${s.password}" }\n    - { name: hostPublicKey, value: "${s.hostKeys.ed25519}" }\n`,
    );
  });
  afterAll(async () => {
    await s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a sidecar without an SFTP component never loads ssh2; one with it does', async () => {
    expect(await loadsSsh2([])).toBe(false);
    expect(await loadsSsh2([dir])).toBe(true);
  });
});
