/**
 * The instance table on a real state store (state.in-memory and state.sqlite): group commit,
 * etag conflicts between two replicas, and purge removing every key.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { factory as memoryFactory } from '../../sidecar/src/components/state/in-memory/index.ts';
import { factory as sqliteFactory } from '../../sidecar/src/components/state/sqlite/index.ts';
import type { ComponentSpec, StateStore } from '../../sidecar/src/components/types.ts';
import { InstanceTable } from '../../sidecar/src/workflows/instances.ts';
import type { EngineEvent } from '../../sidecar/src/workflows/reducer.ts';

const log = pino({ level: 'silent' });
const spec = (type: string, metadata: Record<string, string> = {}): ComponentSpec => ({
  name: 's', type, version: 'v1', metadata, secretKeys: [], initTimeoutMs: 5000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test',
});

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0)) await fn();
});

async function memory(): Promise<StateStore> {
  const s = memoryFactory() as StateStore;
  await s.init(spec('state.in-memory'), { appId: 'a', namespace: 'default', log });
  cleanup.push(() => s.close());
  return s;
}

/** The event a new instance's journal starts with. */
function begin(id: string, name = 'W'): EngineEvent {
  return { rt: 'begin', state: { id, name, status: 'RUNNING', createdAt: 1, executionId: 'e1' } };
}

const table = (store: StateStore, shared: boolean, replicaId = 'r1') => new InstanceTable({ store, prefix: 'app||wf||', shared, replicaId, log });

describe('workflow instance table', () => {
  it('writes the mutations of many instances in one transaction (group commit)', async () => {
    const store = await memory();
    const spy = vi.spyOn(store, 'transact');
    const t = table(store, false);
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        t.mutate(`i${i}`, (d) => {
          d.emit(begin(`i${i}`), { eventId: i, orchestratorStarted: {} });
        }),
      ),
    );
    expect(spy).toHaveBeenCalledTimes(1);
    expect(t.activeCount()).toBe(50);
    const fresh = table(store, false);
    expect((await fresh.loadIndex()).sort()).toEqual(Array.from({ length: 50 }, (_, i) => `i${i}`).sort());
    const c = fresh.get('i7');
    expect(await fresh.history(c)).toEqual([{ eventId: 7, orchestratorStarted: {} }]);
  });

  it('two replicas changing one instance never lose an update (etag conflicts are re-applied)', async () => {
    const store = await memory();
    const a = table(store, true, 'ra');
    const b = table(store, true, 'rb');
    await a.mutate('x', (d) => d.emit(begin('x')));
    const push = (t: InstanceTable, n: number) => t.mutate('x', (d) => d.emit({ rt: 'arrived', event: { eventId: n, eventRaised: { name: `e${n}` } } }));
    await Promise.all(Array.from({ length: 40 }, (_, n) => push(n % 2 ? a : b, n)));
    // the state a third reader loads: the journal's (the record is rewritten only when what it shows changes)
    const fresh = table(store, true, 'rc');
    const loaded = fresh.get('x');
    await fresh.history(loaded);
    expect(loaded.rec?.inbox.map((e) => e.eventId).sort((p, q) => p - q)).toEqual(Array.from({ length: 40 }, (_, n) => n));
  });

  it('creating an instance that another replica created first fails the mutation cleanly', async () => {
    const store = await memory();
    const a = table(store, true, 'ra');
    const b = table(store, true, 'rb');
    const create = (t: InstanceTable, name: string) =>
      t.mutate('same', (d) => {
        if (d.rec) throw new Error(`exists (${d.rec.name})`);
        d.emit(begin('same', name));
      });
    const results = await Promise.allSettled([create(a, 'A'), create(b, 'B')]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason.message).toMatch(/^exists/);
  });

  it('purge deletes the record and every journal batch (SQLite)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-wf-inst-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const store = sqliteFactory() as StateStore;
    await store.init(spec('state.sqlite', { connectionString: join(dir, 's.db') }), { appId: 'a', namespace: 'default', log });
    cleanup.push(() => store.close());
    const t = table(store, false);
    await t.mutate('p', (d) => d.emit(begin('p')));
    for (let n = 0; n < 3; n++) await t.mutate('p', (d) => d.emit({ eventId: n, orchestratorStarted: {} }));
    const keys = ['app||wf||p||m', 'app||wf||p||h0', 'app||wf||p||h1', 'app||wf||p||h2', 'app||wf||p||h3'];
    // the begin's batch and the record, then one batch per write (the record shows nothing new)
    expect((await store.bulkGet(keys)).every(Boolean)).toBe(true);
    await t.mutate('p', (d) => d.emit({ rt: 'purged' }));
    expect((await store.bulkGet(keys)).some(Boolean)).toBe(false);
  });
});
