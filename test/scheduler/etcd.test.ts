import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SchedulerEngine } from '../../scheduler/src/engine.ts';
import { EtcdJobStore } from '../../scheduler/src/store/etcd.ts';
import type { Trigger } from '../../scheduler/src/types.ts';
import { requireService } from '../services/ci.ts';
import { startEtcd, type EtcdTarget } from '../services/etcd.ts';
import { freePort } from '../services/net.ts';
import { postJob, sidecarFor, startRecordingApp, tempDir, waitFor } from '../jobs/helpers.ts';
import { spawnScheduler, type SchedulerProc } from './harness.ts';

const etcd: EtcdTarget = await startEtcd();
const available = requireService('etcd', etcd.available, etcd.why);
const silent = pino({ level: 'silent' });

/**
 * Jobs of app `appId` (namespace default) still stored in etcd whose names start with `start`:
 * none once every fire of them was acked and its progress written, so no trigger of them follows.
 */
async function jobsLeft(prefix: string, appId: string, start: string): Promise<number> {
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: etcd.endpoints });
  try {
    return (await client.getAll().prefix(`${prefix}/jobs/default/${appId}//${start}`).keys()).length;
  } finally {
    client.close();
  }
}

/** partition → replica id, read straight from etcd. */
async function ownersOf(prefix: string): Promise<Map<number, string>> {
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: etcd.endpoints });
  try {
    const all = await client.getAll().prefix(`${prefix}/owners/`).strings();
    return new Map(Object.entries(all).map(([k, v]) => [Number(k.slice(`${prefix}/owners/`.length)), v]));
  } finally {
    client.close();
  }
}

describe.skipIf(!available)('etcd job store (real etcd)', () => {
  afterAll(async () => {
    await etcd.stop();
  });

  it('skips stored jobs that cannot be loaded (the others load, list and fire); a retried create with its request id succeeds', async () => {
    const prefix = `/rt-test/${randomUUID()}`;
    const { Etcd3 } = await import('etcd3');
    const client = new Etcd3({ hosts: etcd.endpoints });
    const at = (name: string) => `${prefix}/jobs/ns/a//${name}`;
    await client.put(at('torn')).value('{not json');
    await client.put(at('far')).value(JSON.stringify({ spec: { schedule: '@every 3000000000h' }, createdAt: Date.now(), gen: 'g', count: 0, nextAt: 10_800_000_000_000_000 }));
    await client.put(at('good')).value(JSON.stringify({ spec: { dueTime: '0s', dataJson: '1' }, createdAt: Date.now(), gen: 'g', count: 0, nextAt: Date.now() }));
    const engine = new SchedulerEngine({ log: silent, store: new EtcdJobStore({ endpoints: etcd.endpoints, prefix, partitions: 2, leaseTtlSec: 2, replicaId: 'solo', log: silent }) });
    await engine.start();
    const got: Trigger[] = [];
    const disconnect = engine.connect({ namespace: 'ns', appId: 'a' }, { name: 't', send: (t) => (got.push(t), engine.ack(t.id, true)) });
    try {
      await waitFor(() => got.some((t) => t.key.name === 'good'), 10_000, 'the good job to fire');
      expect(got.map((t) => t.key.name)).toEqual(['good']);
      // a fired one-shot job leaves the store once its ack is processed; the unloadable ones never show
      await vi.waitFor(async () => expect((await engine.list({ namespace: 'ns', appId: 'a', owner: '' })).map((r) => r.key.name)).toEqual([]), { timeout: 10_000, interval: 100 });
      await expect(engine.get({ namespace: 'ns', appId: 'a', owner: '', name: 'far' })).rejects.toMatchObject({ kind: 'not_found' });
      const key = { namespace: 'ns', appId: 'a', owner: '', name: 'once' };
      await engine.schedule(key, { dueTime: '1h' }, false, 'req-1');
      await expect(engine.schedule(key, { dueTime: '1h' }, false, 'req-1')).resolves.toBeUndefined();
      await expect(engine.schedule(key, { dueTime: '1h' }, false, 'req-2')).rejects.toMatchObject({ kind: 'exists' });
    } finally {
      disconnect();
      await engine.close();
      await client.delete().prefix(prefix);
      client.close();
    }
  });

  it('stores, replaces, lists and deletes jobs, and fires them from the owning engine', async () => {
    const prefix = `/rt-test/${randomUUID()}`;
    const engine = new SchedulerEngine({ log: silent, store: new EtcdJobStore({ endpoints: etcd.endpoints, prefix, partitions: 4, leaseTtlSec: 2, replicaId: 'solo', log: silent }) });
    await engine.start();
    const got: Trigger[] = [];
    const disconnect = engine.connect({ namespace: 'ns', appId: 'a' }, { name: 't', send: (t) => (got.push(t), engine.ack(t.id, true)) });
    try {
      const key = { namespace: 'ns', appId: 'a', owner: '', name: 'j/with slash?' };
      await engine.schedule({ ...key, name: 'j1' }, { schedule: '@every 1h', dataJson: '{"x":1}' }, false);
      await expect(engine.schedule({ ...key, name: 'j1' }, { dueTime: '1h' }, false)).rejects.toMatchObject({ kind: 'exists' });
      await engine.schedule({ ...key, name: 'j1' }, { dueTime: '1h', dataJson: '2' }, true);
      expect((await engine.get({ ...key, name: 'j1' })).spec).toEqual({ dueTime: '1h', dataJson: '2' });
      await engine.schedule({ ...key, owner: 'workflows', name: 'internal' }, { dueTime: '1h' }, false);
      expect((await engine.list({ namespace: 'ns', appId: 'a', owner: '' })).map((r) => r.key.name)).toEqual(['j1']);
      await engine.delete({ ...key, name: 'j1' });
      await expect(engine.get({ ...key, name: 'j1' })).rejects.toMatchObject({ kind: 'not_found' });

      // listing pages through etcd (500 keys a page)
      const names = Array.from({ length: 1200 }, (_, i) => `many-${String(i).padStart(4, '0')}`);
      const queue = [...names];
      await Promise.all(Array.from({ length: 32 }, async () => {
        for (let n = queue.shift(); n; n = queue.shift()) await engine.schedule({ ...key, appId: 'lister', name: n }, { dueTime: '1h' }, false);
      }));
      expect((await engine.list({ namespace: 'ns', appId: 'lister', owner: '' })).map((r) => r.key.name)).toEqual(names);

      await engine.schedule({ ...key, name: 'rep' }, { schedule: '@every 50ms', repeats: 3, dataJson: '"r"' }, false);
      await waitFor(() => got.filter((t) => t.key.name === 'rep').length >= 3, 5000, '3 fires');
      // done (removed after its last ack): no fire can follow
      await waitFor(() => engine.get({ ...key, name: 'rep' }).then(() => false, () => true), 5000, 'the job to be done');
      expect(got.filter((t) => t.key.name === 'rep')).toHaveLength(3);
      await expect(engine.get({ ...key, name: 'rep' })).rejects.toMatchObject({ kind: 'not_found' });
    } finally {
      disconnect();
      await engine.close();
    }
  });

  describe('three scheduler replicas sharing jobs by partition', () => {
    const prefix = `/rt-test/${randomUUID()}`;
    const dir = tempDir('rt-sched-ha-');
    let replicas: SchedulerProc[] = [];
    let app: Awaited<ReturnType<typeof startRecordingApp>>;
    let sc: Awaited<ReturnType<typeof sidecarFor>>;
    const delivered = (prefix: string) => app.received.filter((r) => r.name.startsWith(prefix));

    const args = () => ['--etcd-endpoints', etcd.endpoints.join(','), '--etcd-prefix', prefix, '--partitions', '12', '--lease-ttl', '2'];

    beforeAll(async () => {
      replicas = await Promise.all([0, 1, 2].map(async (i) => spawnScheduler(await freePort(), [...args(), '--replica-id', `replica-${i}`])));
      app = await startRecordingApp();
      sc = await sidecarFor({ appPort: app.port, dataDir: dir.path, appId: 'ha-app', schedulerAddresses: replicas.map((r) => r.address) });
      await waitFor(() => sc.ctx.metadata.snapshot().scheduler.connected_addresses.length === 3, 15_000, 'streams to all 3 replicas');
    });
    afterAll(async () => {
      await sc?.close();
      await Promise.all(replicas.map((r) => r.kill('SIGTERM')));
      await app?.close();
      dir.remove();
    });

    it('reports all three replicas in metadata', () => {
      expect(sc.ctx.metadata.snapshot().scheduler.connected_addresses.sort()).toEqual(replicas.map((r) => r.address).sort());
    });

    it('delivers every trigger exactly once while all is well, also across a planned handover (SIGTERM, rejoin)', { timeout: 60_000 }, async () => {
      const oneShots = 300;
      const repeating = 60;
      const repeats = 12;
      const bodies: [string, unknown][] = [
        ...Array.from({ length: oneShots }, (_, i): [string, unknown] => [`calm-${i}`, { dueTime: `${500 + (i % 30) * 100}ms`, data: i }]),
        ...Array.from({ length: repeating }, (_, i): [string, unknown] => [`calmrep-${i}`, { schedule: '@every 300ms', repeats, data: i }]),
      ];
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let b = bodies.shift(); b; b = bodies.shift()) expect((await postJob(sc.base, b[0], b[1])).status).toBe(204);
        }),
      );
      // replica-2 leaves gracefully while jobs fire, then comes back: partitions move twice
      await waitFor(() => delivered('calmrep-').length >= repeating * 2, 20_000, 'repeating jobs under way');
      const port = replicas[2].port;
      await replicas[2].kill('SIGTERM');
      replicas[2] = await spawnScheduler(port, [...args(), '--replica-id', 'replica-2']);
      await waitFor(() => new Set(delivered('calm-').map((r) => r.name)).size === oneShots, 20_000, 'all one-shot jobs');
      await waitFor(() => delivered('calmrep-').length >= repeating * repeats, 20_000, 'all repeats');
      await waitFor(async () => (await jobsLeft(prefix, 'ha-app', 'calm')) === 0, 20_000, 'every job done');
      expect(delivered('calm-')).toHaveLength(oneShots); // none twice
      const per = new Map<string, number>();
      for (const r of delivered('calmrep-')) per.set(r.name, (per.get(r.name) ?? 0) + 1);
      expect([...per.values()].every((c) => c === repeats)).toBe(true);
      await waitFor(() => sc.ctx.metadata.snapshot().scheduler.connected_addresses.length === 3, 15_000, 'stream to the returned replica');
      await waitFor(async () => new Set((await ownersOf(prefix)).values()).size === 3, 10_000, 'rebalance');
    });

    it('kill -9 of one replica during firing: every trigger is delivered, duplicates counted', { timeout: 60_000 }, async () => {
      const oneShots = 1000;
      const repeating = 150;
      const repeats = 16;
      const post = async (bodies: [string, unknown][]) =>
        Promise.all(
          Array.from({ length: 16 }, async () => {
            for (let b = bodies.shift(); b; b = bodies.shift()) expect((await postJob(sc.base, b[0], b[1])).status).toBe(204);
          }),
        );
      const base = Date.now() + 3000;
      await post(Array.from({ length: oneShots }, (_, i): [string, unknown] => [`storm-${i}`, { dueTime: new Date(base + Math.floor((i / oneShots) * 4000)).toISOString(), data: i }]));
      // repeating jobs fire for 8 s from now, whatever the scheduling above took: kill while they do
      await post(Array.from({ length: repeating }, (_, i): [string, unknown] => [`rep-${i}`, { schedule: '@every 500ms', repeats, data: i }]));
      await waitFor(() => delivered('rep-').length >= repeating * 2, 20_000, 'repeating jobs under way');
      // the partitions are spread over the three replicas
      const owners = await ownersOf(prefix);
      expect(new Set(owners.values())).toEqual(new Set(['replica-0', 'replica-1', 'replica-2']));
      const killedParts = new Set([...owners].filter(([, r]) => r === 'replica-1').map(([p]) => p));
      await replicas[1].kill('SIGKILL');
      const killedAt = Date.now();

      const perRep = () => {
        const m = new Map<string, number>();
        for (const r of delivered('rep-')) m.set(r.name, (m.get(r.name) ?? 0) + 1);
        return m;
      };
      await waitFor(() => new Set(delivered('storm-').map((r) => r.name)).size >= oneShots, 30_000, 'all one-shot jobs after the kill');
      await waitFor(() => [...perRep().values()].filter((c) => c >= repeats).length === repeating, 30_000, `all ${repeats} fires of every repeating job`);
      await waitFor(async () => (await jobsLeft(prefix, 'ha-app', 'storm-')) + (await jobsLeft(prefix, 'ha-app', 'rep-')) === 0, 30_000, 'every job done');
      const names = new Set(delivered('storm-').map((r) => r.name));
      for (let i = 0; i < oneShots; i++) expect(names.has(`storm-${i}`)).toBe(true);
      // jobs of the dead replica's partitions were fired by the others after its death
      const partitionOf = new EtcdJobStore({ endpoints: [], prefix, partitions: 12, replicaId: 'probe', log: silent });
      const takenOver = delivered('rep-').filter((r) => r.at > killedAt && killedParts.has(partitionOf.partitionOf({ namespace: 'default', appId: 'ha-app', owner: '', name: r.name })));
      expect(takenOver.length).toBeGreaterThan(0);
      expect(new Set((await ownersOf(prefix)).values())).toEqual(new Set(['replica-0', 'replica-2']));
      const oneShotDup = delivered('storm-').length - names.size;
      const repDup = [...perRep().values()].reduce((a, c) => a + (c - repeats), 0);
      console.log(
        `etcd HA test: ${oneShots} one-shot jobs + ${repeating} jobs × ${repeats} repeats, replica-1 (${killedParts.size} of 12 partitions) killed during firing; ` +
          `all delivered; ${takenOver.length} fires of its jobs delivered by the others after the kill; duplicates: ${oneShotDup} one-shot, ${repDup} repeat triggers`,
      );
      // the metadata shows the live replicas only
      await waitFor(() => sc.ctx.metadata.snapshot().scheduler.connected_addresses.length === 2, 10_000, 'metadata to drop the dead replica');
    });
  });
});
