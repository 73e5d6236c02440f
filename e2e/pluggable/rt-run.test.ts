/**
 * Pluggable components end to end: the example component runs as its own process, then the real
 * `rt run` CLI starts the sidecar and a small app that round-trips state through it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';
import { componentYaml, startExample, tempDirs, type ExampleProcess, type TempDirs } from '../../test/pluggable/helpers.ts';

const root = resolve(import.meta.dirname, '../..');

/** Runs `rt run ... -- node <app>` to its end; returns exit code and everything printed. */
function rtRun(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000): Promise<{ code: number | null; out: string }> {
  const proc: ChildProcess = spawn(process.execPath, [join(root, 'cli/rt.ts'), 'run', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolveRun) => {
    const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.once('exit', (code) => {
      clearTimeout(t);
      resolveRun({ code, out });
    });
  });
}

// The app: saves state, reads it back and reads metadata through its sidecar, prints one JSON line.
const APP = `
const base = 'http://127.0.0.1:' + process.env.RT_HTTP_PORT + '/v1.0';
const save = await fetch(base + '/state/orders', {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify([{ key: 'order-1', value: { item: 'book', qty: 2 }, metadata: {} }]),
});
const got = await fetch(base + '/state/orders/order-1');
const md = await (await fetch(base + '/metadata')).json();
console.log('RESULT ' + JSON.stringify({ save: save.status, get: got.status, etag: got.headers.get('etag'), value: await got.json(), components: md.components }));
`;

describe('rt run with a pluggable state store (real processes)', () => {
  let dirs: TempDirs;
  let example: ExampleProcess;
  let app: string;

  beforeAll(async () => {
    dirs = tempDirs();
    example = await startExample(dirs.sockets, 'memstore');
    app = join(dirs.root, 'app.mjs');
    writeFileSync(app, APP);
  });

  afterAll(async () => {
    await example?.stop();
    dirs?.cleanup();
  });

  const runWith = async (components: string) => {
    writeFileSync(join(dirs.resources, 'components.yaml'), components);
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    return rtRun(
      ['--app-id', 'orders-app', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--resources-path', dirs.resources, '--data-dir', dirs.data, '--', process.execPath, app],
      { RT_COMPONENTS_SOCKETS_FOLDER: dirs.sockets, HOME: dirs.root },
    );
  };

  it('POST /v1.0/state/<name> and GET /v1.0/state/<name>/<key> round-trip through the component; metadata shows it', async () => {
    const { code, out } = await runWith(componentYaml({ name: 'orders', type: 'state.memstore' }));
    const line = out.split('\n').find((l) => l.includes('RESULT '));
    expect(line, out).toBeDefined();
    const r = JSON.parse(line!.slice(line!.indexOf('RESULT ') + 7));
    expect(r.save).toBe(204);
    expect(r.get).toBe(200);
    expect(r.etag).toMatch(/^\d+$/);
    expect(r.value).toEqual({ item: 'book', qty: 2 });
    expect(r.components).toContainEqual({ name: 'orders', type: 'state.memstore', version: 'v1', capabilities: ['ETAG', 'TRANSACTIONAL', 'QUERY_API'] });
    expect(code).toBe(0);
  });

  it('a component whose socket is missing stops rt with a message naming the socket', async () => {
    const { code, out } = await runWith(componentYaml({ name: 'orders', type: 'state.not-started', initTimeout: '1s' }));
    expect(code).not.toBe(0);
    expect(out).toContain(join(dirs.sockets, 'not-started.sock'));
    expect(out).toContain('must be started before the runtime');
    expect(out).not.toContain('RESULT ');
  });
});
