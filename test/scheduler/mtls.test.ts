/**
 * The scheduler with mutual TLS (--identity-trust-bundle-file): a client needs a workload
 * certificate from the trust bundle to connect at all, and every call is limited to the namespace
 * and app id of its certificate. Real processes' parts: the scheduler as `rt scheduler` starts it
 * (SQLite, TLS files), real grpc-js clients, certificates from the identity library.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerService, type PbKey, type PbRecord } from '../../scheduler/src/grpc/proto.ts';
import { parseSchedulerArgs, SchedulerUsageError, startScheduler, type RunningScheduler } from '../../scheduler/src/main.ts';
import { issueFor, type IssuerSettings } from '../../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';
import { tempDir } from '../jobs/helpers.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { freePort } from '../services/net.ts';

const TD = 'cluster.local';
type Raw = grpc.Client & Record<string, (...a: unknown[]) => unknown>;

async function workloadCert(s: IssuerSettings, namespace: string, appId: string) {
  const key = newWorkloadKey();
  const issued = await issueFor(s, { namespace, appId }, { id: appId, namespace, trustDomain: TD, csrPem: await createCsr(key, { trustDomain: TD, namespace, appId }) });
  return { keyPem: key.keyPem, certPem: issued.certPem };
}

describe('rt scheduler with mutual TLS: each sidecar reaches only its own app', () => {
  const dir = tempDir('rt-sched-mtls-');
  let serving: TestCa;
  let identity: IssuerSettings;
  let sched: RunningScheduler;
  let address: string;
  const clients: grpc.Client[] = [];

  beforeAll(async () => {
    serving = makeTestCa();
    const root = await createRootCa({ ttlMs: 3_600_000 });
    identity = { trustDomain: TD, ca: root, trustBundlePem: root.certPem, ttlMs: 3_600_000 };
    writeFileSync(join(dir.path, 'tls.crt'), serving.cert);
    writeFileSync(join(dir.path, 'tls.key'), serving.key);
    writeFileSync(join(dir.path, 'trust-bundle.pem'), root.certPem);
    const port = await freePort();
    const opts = parseSchedulerArgs(['--port', String(port), '--data-dir', dir.path, '--tls-cert-file', join(dir.path, 'tls.crt'), '--tls-key-file', join(dir.path, 'tls.key'), '--identity-trust-bundle-file', join(dir.path, 'trust-bundle.pem')]);
    if (opts === 'help') throw new Error('help');
    sched = await startScheduler(opts, pino({ level: 'silent' }));
    address = `127.0.0.1:${port}`;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await sched?.close();
    serving?.remove();
    dir.remove();
  });

  const client = (creds: grpc.ChannelCredentials): Raw => {
    const c = new (schedulerService())(address, creds) as unknown as Raw;
    clients.push(c);
    return c;
  };
  const asApp = async (namespace: string, appId: string) => {
    const w = await workloadCert(identity, namespace, appId);
    return client(grpc.credentials.createSsl(Buffer.from(serving.caPem), Buffer.from(w.keyPem), Buffer.from(w.certPem)));
  };
  const unary = <T>(c: Raw, method: string, req: object) =>
    new Promise<{ err: grpc.ServiceError | null; res?: T }>((resolve) =>
      (c[method] as (r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: T) => void) => void).call(c, req, { deadline: Date.now() + 10_000 }, (err, res) => resolve({ err, res })),
    );
  const key = (namespace: string, appId: string, name: string): PbKey => ({ namespace, appId, owner: '', name });
  /** The first message (or error) of a watch stream after a hello. */
  const watch = (c: Raw, hello: { namespace: string; appId: string }) =>
    new Promise<{ err?: grpc.ServiceError; msg?: { ready?: object; triggers?: { key: PbKey }[] }[] }>((resolve) => {
      const stream = (c.WatchJobs as () => grpc.ClientDuplexStream<unknown, unknown>).call(c);
      const msgs: { ready?: object; triggers?: { key: PbKey }[] }[] = [];
      stream.on('error', (e: grpc.ServiceError) => resolve({ err: e }));
      stream.on('data', (m: { ready?: object; triggers?: { key: PbKey }[] }) => {
        msgs.push(m);
        if (m.triggers?.length) {
          stream.cancel();
          resolve({ msg: msgs });
        }
      });
      stream.write({ hello });
    });

  it('serves an app its own jobs, and refuses to schedule, get, delete, list or watch another app\'s with PERMISSION_DENIED', async () => {
    const a = await asApp('shop', 'orders');
    const b = await asApp('shop', 'billing');
    expect((await unary(a, 'ScheduleJob', { key: key('shop', 'orders', 'a1'), job: { dueTime: '1h', dataJson: '"a"' } })).err).toBeNull();
    expect((await unary(b, 'ScheduleJob', { key: key('shop', 'billing', 'b1'), job: { dueTime: '1h', dataJson: '"secret of b"' } })).err).toBeNull();

    const refused = [
      await unary(a, 'ScheduleJob', { key: key('shop', 'billing', 'planted'), job: { dueTime: '1h' } }),
      await unary(a, 'GetJob', { key: key('shop', 'billing', 'b1') }),
      await unary(a, 'DeleteJob', { key: key('shop', 'billing', 'b1') }),
      await unary(a, 'ListJobs', { namespace: 'shop', appId: 'billing' }),
      await unary(a, 'ListJobs', { namespace: 'other', appId: '' }),
      await unary(a, 'GetJob', { key: key('other', 'orders', 'a1') }),
    ];
    for (const r of refused) {
      expect(r.err?.code).toBe(grpc.status.PERMISSION_DENIED);
      expect(r.err?.details).toMatch(/but the client certificate is spiffe:\/\/cluster\.local\/ns\/shop\/orders: a sidecar reaches only its own app's jobs/);
    }
    // B's job is intact; A listing "everything" (no namespace, no app id) gets its own jobs only
    expect((await unary<{ job: PbRecord }>(b, 'GetJob', { key: key('shop', 'billing', 'b1') })).res?.job.job?.dataJson).toBe('"secret of b"');
    expect((await unary<{ jobs: PbRecord[] }>(a, 'ListJobs', {})).res?.jobs.map((j) => j.key?.name)).toEqual(['a1']);
    expect((await unary<{ jobs: PbRecord[] }>(b, 'ListJobs', { namespace: 'shop', appId: 'billing' })).res?.jobs.map((j) => j.key?.name)).toEqual(['b1']);

    // the trigger stream: a hello for another app is refused; B's own due job reaches B
    const w1 = await watch(a, { namespace: 'shop', appId: 'billing' });
    expect(w1.err?.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(w1.err?.details).toMatch(/hello names app "billing"/);
    expect((await unary(b, 'ScheduleJob', { key: key('shop', 'billing', 'now'), job: { dueTime: '0s', dataJson: '"now"' } })).err).toBeNull();
    const w2 = await watch(b, { namespace: 'shop', appId: 'billing' });
    expect(w2.err).toBeUndefined();
    expect(w2.msg?.flatMap((m) => m.triggers ?? []).map((t) => t.key.name)).toEqual(['now']);
  });

  it('lets no client connect without a certificate from the trust bundle, nor in plaintext', async () => {
    const k = key('shop', 'orders', 'x');
    const none = await unary(client(grpc.credentials.createSsl(Buffer.from(serving.caPem))), 'GetJob', { key: k });
    expect(none.err?.code).toBe(grpc.status.UNAVAILABLE);
    const plain = await unary(client(grpc.credentials.createInsecure()), 'GetJob', { key: k });
    expect(plain.err?.code).toBe(grpc.status.UNAVAILABLE);
    const stranger = await createRootCa({ ttlMs: 3_600_000 });
    const w = await workloadCert({ ...identity, ca: stranger, trustBundlePem: stranger.certPem }, 'shop', 'orders');
    const foreign = await unary(client(grpc.credentials.createSsl(Buffer.from(serving.caPem), Buffer.from(w.keyPem), Buffer.from(w.certPem))), 'GetJob', { key: k });
    expect(foreign.err?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it('needs the TLS files for mutual TLS', () => {
    expect(() => parseSchedulerArgs(['--identity-trust-bundle-file', join(dir.path, 'trust-bundle.pem')])).toThrow(SchedulerUsageError);
    expect(() => parseSchedulerArgs(['--identity-trust-bundle-file', join(dir.path, 'trust-bundle.pem')])).toThrow(/needs --tls-cert-file and --tls-key-file/);
  });
});
