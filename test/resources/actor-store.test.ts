/**
 * The workflows' actor state store is chosen at start. A hot update that changes or removes its
 * Component is refused with a clear condition — the log, /v1.0/healthz/outbound and the metadata
 * say so — and the loaded store keeps serving the running workflow instances; taking the change
 * back clears the condition.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Sidecar, startSidecar } from '../../sidecar/src/sidecar.ts';

describe('a changed actor state store under running workflows', () => {
  let dir: string;
  let res: string;
  let sidecar: Sidecar;
  let base: string;
  const logged: string[] = [];
  const store = (table: string) => ({
    apiVersion: 'rt.io/v1alpha1',
    kind: 'Component',
    metadata: { name: 'wf' },
    spec: {
      type: 'state.sqlite',
      version: 'v1',
      metadata: [
        { name: 'connectionString', value: join(dir, 'wf.db') },
        { name: 'tableName', value: table },
        { name: 'actorStateStore', value: 'true' },
      ],
    },
  });
  const other = { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'mem' }, spec: { type: 'state.in-memory', version: 'v1', metadata: [] } };
  const put = (docs: object[]) => writeFile(join(res, 'components.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  const outbound = async () => {
    const r = await fetch(`${base}/v1.0/healthz/outbound`);
    return { status: r.status, message: r.status === 204 ? '' : ((await r.json()) as { message: string }).message };
  };
  const storeInMetadata = async () => ((await (await fetch(`${base}/v1.0/metadata`)).json()) as { extended: Record<string, string> }).extended.workflowStateStore;
  const start = (id: string) => fetch(`${base}/v1.0-beta1/workflows/rt/order/start?instanceID=${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const status = async (id: string) => {
    const r = await fetch(`${base}/v1.0-beta1/workflows/rt/${id}`);
    return r.status === 200 ? ((await r.json()) as { runtimeStatus: string }).runtimeStatus : r.status;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-actor-store-'));
    res = join(dir, 'res');
    mkdirSync(res);
    await put([store('wf1'), other]);
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(line) });
    sidecar = await startSidecar({ appId: 'wfapp', httpPort: 0, grpcPort: 0, enableMetrics: false, resourcesPaths: [res], dataDir: join(dir, 'data'), logger: log });
    base = `http://127.0.0.1:${sidecar.httpPort}`;
  });

  afterAll(async () => {
    await sidecar?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a change and a removal of the store in use, keeps it working, and clears the condition when the change is taken back', async () => {
    expect(await storeInMetadata()).toBe('wf');
    expect((await start('before')).status).toBe(202);
    expect(await status('before')).toBe('PENDING');
    const loaded = sidecar.ctx.components.get('wf')?.instance;

    // a change of the store in use: refused, said in the log, healthz/outbound and metadata
    await put([store('wf2'), other]);
    await vi.waitFor(async () => expect((await outbound()).message).toMatch(/change of component wf refused: workflows use it as their actor state store/), { timeout: 10_000 });
    expect((await outbound()).status).toBe(500);
    expect(await storeInMetadata()).toBe('wf (a change of it was refused: restart to use it)');
    expect(logged.join('')).toMatch(/"level":50.*change of component wf refused/);
    // the loaded store is the same and keeps serving the running instances, old and new
    expect(sidecar.ctx.components.get('wf')?.instance).toBe(loaded);
    expect(sidecar.ctx.components.get('wf')?.spec.metadata.tableName).toBe('wf1');
    expect(await status('before')).toBe('PENDING');
    expect((await start('after')).status).toBe(202);
    expect(await status('after')).toBe('PENDING');

    // removing it: refused the same way, while other components still apply
    await put([]);
    await vi.waitFor(async () => expect((await outbound()).message).toMatch(/removal of component wf refused/), { timeout: 10_000 });
    await vi.waitFor(() => expect(sidecar.ctx.components.get('mem')).toBeUndefined(), { timeout: 10_000 });
    expect(sidecar.ctx.components.get('wf')?.instance).toBe(loaded);
    expect(await status('after')).toBe('PENDING');

    // taken back: the condition clears
    await put([store('wf1'), other]);
    await vi.waitFor(async () => expect(await outbound()).toEqual({ status: 204, message: '' }), { timeout: 10_000 });
    expect(sidecar.ctx.components.get('mem')).toBeDefined();
    expect(sidecar.ctx.components.get('wf')?.instance).toBe(loaded);
    expect(await storeInMetadata()).toBe('wf');
  });
});
