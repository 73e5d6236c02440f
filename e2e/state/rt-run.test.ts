/**
 * State end to end through the real `rt run`: an app started by the CLI finds its sidecar in
 * DAPR_HTTP_PORT, writes and reads state in a SQLite store and reads the metadata API; a
 * second `rt run` over the same file sees what the first one wrote.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/services/net.ts';

const root = resolve(import.meta.dirname, '../..');
const rt = join(root, 'cli/rt.ts');

/** The app: plain JavaScript, as a user would write it against the state API. */
const APP = `
const base = 'http://127.0.0.1:' + process.env.DAPR_HTTP_PORT + '/v1.0';
const mode = process.argv[2];
const count = async () => {
  const r = await fetch(base + '/state/store/visits');
  return r.status === 204 ? 0 : (await r.json()).n;
};
const n = await count();
const etag = (await fetch(base + '/state/store/visits')).headers.get('etag');
const save = await fetch(base + '/state/store', { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify([{ key: 'visits', value: { n: n + 1 }, ...(etag ? { etag } : {}) }]) });
if (save.status !== 204) { console.log('save failed', save.status, await save.text()); process.exit(3); }
const md = await (await fetch(base + '/metadata')).json();
const store = md.components.find((c) => c.name === 'store');
console.log('[app] ' + mode + ' visits=' + (await count()) + ' store=' + store.type + ' caps=' + store.capabilities.sort().join(','));
`;

function rtRun(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolvePromise) => {
    const proc = spawn(process.execPath, [rt, 'run', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 40_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, out });
    });
  });
}

describe('state through rt run (real CLI)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-state-e2e-'));
    await mkdir(join(dir, 'resources'));
    await writeFile(join(dir, 'app.mjs'), APP);
    await writeFile(
      join(dir, 'resources', 'store.yaml'),
      `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: store\nspec:\n  type: state.sqlite\n  version: v1\n  metadata:\n    - name: connectionString\n      value: ${JSON.stringify(join(dir, 'db', 'state.db'))}\n`,
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('an app reads and writes state and metadata through its sidecar; state survives a restart', { timeout: 90_000 }, async () => {
    const args = async (mode: string) => [
      '--app-id', 'state-e2e', '--http-port', String(await freePort()), '--grpc-port', String(await freePort()),
      '--resources-path', join(dir, 'resources'), '--data-dir', join(dir, 'data'), '--log-level', 'warn',
      '--', process.execPath, join(dir, 'app.mjs'), mode,
    ];
    const first = await rtRun(await args('first'));
    expect(first.code, first.out).toBe(0);
    expect(first.out).toContain('[app] first visits=1 store=state.sqlite caps=ACTOR,ETAG,QUERY_API,TRANSACTIONAL');
    const second = await rtRun(await args('second'));
    expect(second.code, second.out).toBe(0);
    expect(second.out).toContain('[app] second visits=2');
  });
});
