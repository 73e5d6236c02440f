/**
 * Resource files changed under a running sidecar: components are added, updated and removed without
 * a restart (file watcher → ResourceApplier → registry), while requests keep flowing and none fails.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Sidecar, startSidecar } from '../../sidecar/src/sidecar.ts';

const silent = pino({ level: process.env.RT_TEST_LOG ?? 'silent' });
const comp = (name: string, type: string, metadata: { name: string; value?: string; secretKeyRef?: object }[] = [], extra: object = {}) => ({
  apiVersion: 'rt.io/v1alpha1',
  kind: 'Component',
  metadata: { name },
  spec: { type, version: 'v1', metadata },
  ...extra,
});

describe('hot reload of resource files', () => {
  let dir: string;
  let res: string;
  let sidecar: Sidecar;
  let base: string;
  const put = (docs: object[]) => writeFile(join(res, 'components.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  const components = async () => ((await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string; type: string }[] }).components;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-hot-'));
    res = join(dir, 'res');
    await mkdir(res);
    await put([comp('store', 'state.in-memory')]);
    sidecar = await startSidecar({ appId: 'hot', httpPort: 0, grpcPort: 0, enableMetrics: false, resourcesPaths: [res], dataDir: dir, logger: silent });
    base = `http://127.0.0.1:${sidecar.httpPort}`;
  });

  afterAll(async () => {
    await sidecar?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes and reads state on `store` until stop() is called; returns every status seen. */
  const traffic = (store: string) => {
    let running = true;
    const statuses: number[] = [];
    const step = async (i: number) => {
      const save = await fetch(`${base}/v1.0/state/${store}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: `k${i % 10}`, value: i }]) });
      await save.arrayBuffer();
      statuses.push(save.status);
      const get = await fetch(`${base}/v1.0/state/${store}/k${i % 10}`);
      await get.arrayBuffer();
      statuses.push(get.status);
    };
    const done = (async () => {
      // a failed connection counts as status 0 (and fails the test), never as an unhandled error
      for (let i = 0; running; i++) await step(i).catch(() => statuses.push(0));
    })();
    return {
      statuses,
      stop: async () => {
        running = false;
        await done;
        return statuses;
      },
    };
  };

  it('adds, updates and removes state stores and secret stores while requests are in flight; none fails', async () => {
    const t = traffic('store');
    await vi.waitFor(() => expect(t.statuses.length).toBeGreaterThan(20), { timeout: 10_000 });

    // add a secret store and a second state store that uses it
    await writeFile(join(dir, 'secrets.json'), JSON.stringify({ db: { table: 't1' } }));
    await put([
      comp('store', 'state.in-memory'),
      comp('files', 'secretstores.local.file', [{ name: 'secretsFile', value: join(dir, 'secrets.json') }, { name: 'multiValued', value: 'true' }]),
      comp('second', 'state.sqlite', [{ name: 'connectionString', value: join(dir, 'second.db') }, { name: 'tableName', secretKeyRef: { name: 'db', key: 'table' } }], { auth: { secretStore: 'files' } }),
    ]);
    await vi.waitFor(async () => expect((await components()).map((c) => c.name).sort()).toEqual(['files', 'second', 'store']), { timeout: 10_000 });
    expect(sidecar.ctx.components.get('second')?.spec.metadata.tableName).toBe('t1');

    // update: the store in use is replaced (open new, swap, close old) several times under load
    for (const n of [1, 2, 3]) {
      const before = sidecar.ctx.components.get('store')?.instance;
      await put([
        comp('store', 'state.in-memory', [{ name: 'generation', value: String(n) }]),
        comp('files', 'secretstores.local.file', [{ name: 'secretsFile', value: join(dir, 'secrets.json') }, { name: 'multiValued', value: 'true' }]),
        comp('second', 'state.sqlite', [{ name: 'connectionString', value: join(dir, 'second.db') }, { name: 'tableName', secretKeyRef: { name: 'db', key: 'table' } }], { auth: { secretStore: 'files' } }),
      ]);
      await vi.waitFor(() => expect(sidecar.ctx.components.get('store')?.instance).not.toBe(before), { timeout: 10_000 });
      expect(sidecar.ctx.components.get('store')?.spec.metadata.generation).toBe(String(n));
      const seen = t.statuses.length;
      await vi.waitFor(() => expect(t.statuses.length).toBeGreaterThan(seen + 10), { timeout: 10_000 });
    }

    // remove the secret store and the second store; the first keeps serving
    await put([comp('store', 'state.in-memory', [{ name: 'generation', value: '3' }])]);
    await vi.waitFor(async () => expect((await components()).map((c) => c.name)).toEqual(['store']), { timeout: 10_000 });
    const statuses = await t.stop();
    expect(statuses.length).toBeGreaterThan(50);
    expect(statuses.filter((s) => s !== 204 && s !== 200)).toEqual([]);
  });

  it('a state store removed while it is being called answers 400 for new calls, never 5xx', async () => {
    await put([comp('store', 'state.in-memory'), comp('gone', 'state.in-memory')]);
    await vi.waitFor(async () => expect((await components()).map((c) => c.name).sort()).toEqual(['gone', 'store']), { timeout: 10_000 });
    const t = traffic('gone');
    await vi.waitFor(() => expect(t.statuses.length).toBeGreaterThan(10), { timeout: 10_000 });
    await put([comp('store', 'state.in-memory')]);
    await vi.waitFor(async () => expect((await components()).map((c) => c.name)).toEqual(['store']), { timeout: 10_000 });
    const statuses = await t.stop();
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.at(-1)).toBe(400);
  });

  it('a file that no longer parses keeps the last good state and shows in /v1.0/healthz/outbound', async () => {
    await writeFile(join(res, 'components.yaml'), 'kind: Component\napiVersion: rt.io/v1alpha1\nmetadata: {name: x}\nspec: {type: "no-dot", version: v1}\n');
    await vi.waitFor(
      async () => {
        const r = await fetch(`${base}/v1.0/healthz/outbound`);
        expect(r.status).toBe(500);
        expect(((await r.json()) as { message: string }).message).toMatch(/components\.yaml: Component "x": spec\.type/);
      },
      { timeout: 10_000 },
    );
    expect((await components()).map((c) => c.name)).toEqual(['store']);
    await put([comp('store', 'state.in-memory')]);
    await vi.waitFor(async () => expect((await fetch(`${base}/v1.0/healthz/outbound`)).status).toBe(204), { timeout: 10_000 });
  });
});

describe('files in a watched folder that are not resources', () => {
  let dir: string;
  let sidecar: Sidecar;
  let base: string;
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push((JSON.parse(line) as { msg: string }).msg) });
  const components = async () => ((await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string }[] }).components.map((c) => c.name).sort();
  const count = (text: string) => warnings.filter((w) => w.includes(text)).length;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-hot-skip-'));
    // a local file secret store's data beside the component files, and a compose file
    await writeFile(join(dir, 'secrets.json'), JSON.stringify({ db: { table: 't1' } }));
    await writeFile(join(dir, 'compose.yaml'), stringify({ services: { redis: { image: 'redis:7' } } }));
    await writeFile(join(dir, 'components.yaml'), stringify(comp('files', 'secretstores.local.file', [{ name: 'secretsFile', value: join(dir, 'secrets.json') }])));
    sidecar = await startSidecar({ appId: 'hot-skip', httpPort: 0, grpcPort: 0, enableMetrics: false, resourcesPaths: [dir], dataDir: join(dir, 'data'), logger });
    base = `http://127.0.0.1:${sidecar.httpPort}`;
  });

  afterAll(async () => {
    await sidecar?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('start: skipped with a warning each, the components load', async () => {
    expect(await components()).toEqual(['files']);
    expect(count(`${join(dir, 'secrets.json')}: not a .yaml or .yml file, skipped`)).toBe(1);
    expect(count(`${join(dir, 'compose.yaml')}: document 1 has no kind: not a resource, skipped`)).toBe(1);
  });

  it('re-reads skip them the same way, warn once per file, and apply the resources beside them', async () => {
    await writeFile(join(dir, 'secrets.json'), JSON.stringify({ db: { table: 't2' } }));
    await writeFile(join(dir, 'notes.txt'), 'not a resource');
    await writeFile(join(dir, 'more.yaml'), [stringify(comp('extra', 'state.in-memory')), stringify({ name: 'not a resource' })].join('---\n'));
    await vi.waitFor(async () => expect(await components()).toEqual(['extra', 'files']), { timeout: 10_000 });
    await vi.waitFor(() => expect(count(`${join(dir, 'more.yaml')}: document 2 has no kind`)).toBe(1), { timeout: 5000 });
    expect(count(`${join(dir, 'notes.txt')}: not a .yaml or .yml file`)).toBe(1);
    expect(count(`${join(dir, 'secrets.json')}: not a .yaml or .yml file`)).toBe(1);
    expect(count(`${join(dir, 'compose.yaml')}: document 1 has no kind`)).toBe(1);
    expect((await fetch(`${base}/v1.0/healthz/outbound`)).status).toBe(204);
  });

  it('a document of an rt API group without kind is still an error: the last good state is kept', async () => {
    await writeFile(join(dir, 'more.yaml'), 'apiVersion: rt.io/v1alpha1\nmetadata: {name: nokind}\n');
    await vi.waitFor(
      async () => {
        const r = await fetch(`${base}/v1.0/healthz/outbound`);
        expect(r.status).toBe(500);
        expect(((await r.json()) as { message: string }).message).toMatch(/more\.yaml: resource "nokind": kind: is required/);
      },
      { timeout: 10_000 },
    );
    expect(await components()).toEqual(['extra', 'files']);
    await rm(join(dir, 'more.yaml'));
    await vi.waitFor(async () => expect(await components()).toEqual(['files']), { timeout: 10_000 });
    expect((await fetch(`${base}/v1.0/healthz/outbound`)).status).toBe(204);
  });
});
