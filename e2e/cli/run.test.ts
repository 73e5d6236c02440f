/**
 * `rt run` end to end: the real CLI starts the sidecar and the example app (as `npm start`
 * does, on free ports), the app writes and reads state and metadata through its sidecar.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitForPort } from '../../test/services/net.ts';
import { runRt, until } from '../rt-process.ts';

describe('rt run (real CLI processes)', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'rt-run-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('runs the example app with examples/resources: the app saves and reads state through its sidecar', async () => {
    const [appPort, httpPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
    const run = runRt(
      ['run', '--app-id', 'example', '--app-port', String(appPort), '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--resources-path', 'examples/resources', '--data-dir', join(home, 'data'), '--', process.execPath, 'examples/app/server.ts'],
      { HOME: home },
    );
    try {
      await until(run, () => run.out().includes('[app] read state:'));
      expect(run.out()).toContain('[app] saved state: HTTP 204');
      expect(run.out()).toMatch(/\[app\] read state: HTTP 200 \{"hello":"world","at":\d+\}/);
      const md = (await (await fetch(`http://127.0.0.1:${httpPort}/v1.0/metadata`)).json()) as Record<string, any>;
      expect(md.id).toBe('example');
      expect(md.extended).toMatchObject({ cliPID: String(run.proc.pid), appCommand: `${process.execPath} examples/app/server.ts` });
      expect(Number(md.extended.appPID)).toBeGreaterThan(0);
      expect(md.extended['example-started']).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(md.components).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'statestore', type: 'state.sqlite', version: 'v1' })]));
      expect(md.enabledFeatures).toEqual(['SchedulerReminders']);
      // the state went to the SQLite file under the data folder named in the resource ({env:HOME})
      const got = await fetch(`http://127.0.0.1:${httpPort}/v1.0/state/statestore/greeting`);
      expect(got.status).toBe(200);
    } finally {
      run.proc.kill('SIGTERM');
    }
    // SIGTERM goes to the app, which exits 0; rt stops the sidecar and exits with the app's code
    expect(await run.exit).toBe(0);
  });

  it('passes the ports and token to the app and exits with its exit code', async () => {
    const dir = await mkdtemp(join(home, 'app-'));
    const app = join(dir, 'app.mjs');
    await writeFile(
      app,
      `const base = 'http://127.0.0.1:' + process.env.RT_HTTP_PORT;
if (process.env.DAPR_HTTP_PORT !== process.env.RT_HTTP_PORT || !process.env.RT_GRPC_PORT) process.exit(10);
const h = { 'rt-api-token': process.env.RT_API_TOKEN };
const put = await fetch(base + '/v1.0/metadata/from-app', { method: 'PUT', headers: h, body: 'hi' });
const md = await (await fetch(base + '/v1.0/metadata', { headers: h })).json();
const denied = await fetch(base + '/v1.0/metadata');
process.exit(put.status === 204 && md.extended['from-app'] === 'hi' && denied.status === 401 ? 7 : 11);
`,
    );
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const run = runRt(['run', '--app-id', 'codes', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', join(dir, 'data'), '--', process.execPath, app], {
      RT_API_TOKEN: 'secret-token',
    });
    expect(await run.exit).toBe(7);
    expect(run.out()).not.toContain('secret-token');
  });

  it('rejects bad flags with a usage message and exit code 2', async () => {
    const run = runRt(['run', '--app-port', 'x', '--', 'true']);
    expect(await run.exit).toBe(2);
    expect(run.out()).toMatch(/rt run: (--app-id is required|--app-port must be a whole number)/);
  });

  it('rt sidecar runs alone until SIGTERM', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const run = runRt(['sidecar', '--app-id', 'alone', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', join(home, 'alone')]);
    await waitForPort('127.0.0.1', httpPort);
    expect((await fetch(`http://127.0.0.1:${httpPort}/v1.0/healthz`)).status).toBe(204);
    run.proc.kill('SIGTERM');
    expect(await run.exit).toBe(0);
  });
});
