/**
 * `rt run` with an unchanged @dapr/dapr workflow app: the app finds the sidecar through the
 * environment `rt run` gives it, and its workflow completes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';

const CLI = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));
const APP = fileURLToPath(new URL('./fixtures/dapr-app.ts', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-run-'));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('rt run with a @dapr/dapr workflow app', () => {
  it('runs the app’s workflow to completion and exits with the app', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const p = spawn(process.execPath, [CLI, 'run', '--app-id', 'wf-run', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', dataDir, '--log-level', 'error', '--', process.execPath, APP], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr.on('data', () => undefined);
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => p.kill('SIGKILL'), 45_000);
      p.once('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(out).toContain('RESULT "Hi rt"');
    expect(code).toBe(0);
  }, 60_000);
});
