/**
 * The scheduler's etcd store over TLS: a real etcd serving clients on https only (certificate
 * from a test CA made with the openssl CLI); the store verifies it with --etcd-ca-file, and
 * refuses to trust it without.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSchedulerArgs, startScheduler, type SchedulerProcessOptions } from '../../scheduler/src/main.ts';
import { EtcdJobStore } from '../../scheduler/src/store/etcd.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { requireService } from '../services/ci.ts';
import { startEtcd, type EtcdTarget } from '../services/etcd.ts';
import { freePort } from '../services/net.ts';
import { tempDir } from '../jobs/helpers.ts';

const dir = tempDir('rt-etcd-tls-');
const ca: TestCa = makeTestCa();
writeFileSync(join(dir.path, 'etcd.crt'), ca.cert);
writeFileSync(join(dir.path, 'etcd.key'), ca.key);
const etcd: EtcdTarget = await startEtcd({ tls: { certFile: join(dir.path, 'etcd.crt'), keyFile: join(dir.path, 'etcd.key') } });
let available: boolean;
try {
  available = requireService('etcd (TLS)', etcd.available, etcd.why);
} catch (e) {
  // with CI=true a missing etcd fails the file here, before afterAll exists: clean up first
  await etcd.stop();
  ca.remove();
  dir.remove();
  throw e;
}
if (!available) {
  await etcd.stop();
  ca.remove();
  dir.remove();
}
const silent = pino({ level: 'silent' });

describe.skipIf(!available)('scheduler on etcd over TLS (real etcd, test CA)', () => {
  afterAll(async () => {
    await etcd.stop();
    ca.remove();
    dir.remove();
  });

  it('rt scheduler --etcd-ca-file stores and lists jobs in an https-only etcd', async () => {
    const opts = parseSchedulerArgs([
      '--port', String(await freePort()), '--log-level', 'error', '--data-dir', dir.path,
      '--etcd-endpoints', etcd.endpoints.map((e) => `https://${e}`).join(','), '--etcd-ca-file', ca.caFile,
    ]) as SchedulerProcessOptions;
    expect(opts.etcdTls?.ca.toString()).toBe(ca.caPem);
    const sched = await startScheduler(opts, silent);
    try {
      const ref = { namespace: 'default', appId: 'tls', owner: '' };
      await sched.engine.schedule({ ...ref, name: 'j1' }, { dueTime: '1h', dataJson: '{"a":1}' }, false);
      const jobs = await sched.engine.list(ref);
      expect(jobs.map((j) => j.key.name)).toEqual(['j1']);
    } finally {
      await sched.close();
    }
  });

  it('without the CA the store does not trust etcd and fails to start', async () => {
    const store = new EtcdJobStore({ endpoints: etcd.endpoints.map((e) => `https://${e}`), replicaId: 'no-ca', log: silent });
    // the TLS handshake fails (unknown CA) well before the store's 10 s "did not answer" limit
    const started = Date.now();
    await expect(store.start({ upsert: () => undefined, remove: () => undefined } as never)).rejects.toThrow(/certificate|SSL|TLS|handshake|UNAVAILABLE|connect/i);
    expect(Date.now() - started).toBeLessThan(9_000);
    await store.close().catch(() => undefined);
  });

  it('rejects an etcd client certificate without the CA', () => {
    expect(() => parseSchedulerArgs(['--etcd-cert-file', 'a', '--etcd-key-file', 'b'])).toThrow(/need --etcd-ca-file/);
  });
});
