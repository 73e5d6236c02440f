/**
 * The gRPC runtime API end to end with real `rt` CLI processes: an app that talks to its
 * sidecar only through the @dapr/dapr SDK over gRPC (with the API token), and Shutdown
 * stopping `rt run` (CLI signal path) and `rt sidecar` (graceful close) cleanly.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { freePort, waitForPort } from '../../test/services/net.ts';
import { runRt, type RtProcess } from '../rt-process.ts';

async function exitWithin(run: RtProcess, ms: number): Promise<number | null> {
  const t = setTimeout(() => run.proc.kill('SIGKILL'), ms);
  const code = await run.exit;
  clearTimeout(t);
  return code;
}

let home: string;
let resources: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'rt-grpc-e2e-'));
  resources = join(home, 'resources');
  await mkdir(resources);
  await writeFile(
    join(resources, 'statestore.yaml'),
    `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: statestore\nspec:\n  type: state.sqlite\n  version: v1\n  metadata:\n    - name: connectionString\n      value: ${JSON.stringify(join(home, 'state.db'))}\n`,
  );
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('gRPC runtime API with the rt CLI', () => {
  it('rt run: the app uses state and metadata over gRPC with the token, then Shutdown stops app and sidecar', { timeout: 60_000 }, async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const run = runRt(
      ['run', '--app-id', 'grpc-e2e', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--resources-path', resources, '--data-dir', join(home, 'data-run'), '--', process.execPath, join(import.meta.dirname, 'fixtures/app.mjs')],
      { HOME: home, RT_API_TOKEN: 'e2e-token-0123456789' },
    );
    const code = await exitWithin(run, 40_000);
    const out = run.out();
    expect(out).toContain('[app] state {"via":"grpc"}');
    expect(out).toContain(`[app] metadata grpc-e2e cliPID=${run.proc.pid}`);
    expect(out).toContain('[app] sending shutdown');
    // Shutdown → SIGTERM to rt run → forwarded to the app → app exits 0 → rt stops the sidecar
    expect(out).toContain('[app] got SIGTERM');
    expect(code).toBe(0);
  });

  it('rt sidecar: Shutdown over gRPC closes the sidecar and the process exits 0', { timeout: 60_000 }, async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const run = runRt(['sidecar', '--app-id', 'grpc-e2e-alone', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--resources-path', resources, '--data-dir', join(home, 'data-alone')], {
      HOME: home,
    });
    try {
      await waitForPort('127.0.0.1', grpcPort, 20_000);
      const Client = runtimeClient();
      const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
      const call = (method: string, req: unknown) =>
        new Promise<unknown>((res, rej) => (client as any)[method](req, (e: Error | null, r: unknown) => (e ? rej(e) : res(r))));
      await call('SaveState', { store_name: 'statestore', states: [{ key: 'alone', value: Buffer.from('1') }] });
      expect(await call('Shutdown', {})).toEqual({});
      client.close();
    } catch (e) {
      run.proc.kill('SIGKILL');
      throw new Error(`${(e as Error).message}\nrt printed:\n${run.out()}`);
    }
    const code = await exitWithin(run, 20_000);
    expect({ code, out: run.out().includes('shutdown requested over the gRPC API') }).toEqual({ code: 0, out: true });
  });
});
