/**
 * The credentials the sidecar's control-plane clients use with mTLS (the scheduler client, the
 * operator stream: grpcClientCredentials), against a real gRPC server over TLS that requires a
 * client certificate of the trust bundle and answers with the serial of the one it was shown:
 * the workload certificate is presented; after a rotation a new connection presents the new one
 * while the established one goes on; the server is checked against the trust bundle and trust
 * domain (or a CA file); a client without a certificate gets nothing.
 */
import { X509Certificate } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueFor } from '../../sidecar/src/identity/issue.ts';
import { IdentityManager } from '../../sidecar/src/identity/manager.ts';
import { caClient, caService, type CaClient, type SignCertificateRequest } from '../../sidecar/src/identity/proto.ts';
import { LocalSigner } from '../../sidecar/src/identity/signers.ts';
import { grpcClientCredentials } from '../../sidecar/src/identity/tls.ts';
import { createCsr, createRootCa, newWorkloadKey, type SigningCa } from '../../sidecar/src/identity/x509.ts';
import { ManualClock } from '../../shared/clock.ts';

const LIFE = 60_000;

describe('control-plane clients with the workload certificate', () => {
  let ca: SigningCa;
  let server: grpc.Server;
  let address = '';
  const clients: grpc.Client[] = [];

  async function serverCertificate(trustDomain: string) {
    const key = newWorkloadKey();
    const csrPem = await createCsr(key, { trustDomain, namespace: 'rt-system', appId: 'rt-scheduler' });
    const issued = await issueFor({ trustDomain, ca, trustBundlePem: ca.certPem, ttlMs: LIFE }, { namespace: 'rt-system', appId: 'rt-scheduler' }, { id: '', namespace: '', trustDomain: '', csrPem });
    return { key: key.keyPem, cert: issued.certPem };
  }

  beforeAll(async () => {
    ca = await createRootCa({ ttlMs: 24 * 3_600_000 });
    const me = await serverCertificate('cluster.local');
    server = new grpc.Server();
    server.addService(caService(), {
      // answers with the serial of the client certificate it was shown
      SignCertificate: (call: grpc.ServerUnaryCall<SignCertificateRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        const peer = call.getAuthContext().sslPeerCertificate;
        cb(null, { workloadCertificate: Buffer.from(peer ? `${peer.serialNumber} ${peer.subjectaltname}` : 'none'), trustChainCertificates: [] });
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(Buffer.from(ca.certPem), [{ cert_chain: Buffer.from(me.cert), private_key: Buffer.from(me.key) }], true), (e, p) => (e ? reject(e) : resolve(p))),
    );
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => {
    for (const c of clients) c.close();
    server?.forceShutdown();
  });

  const shown = (client: CaClient) =>
    new Promise<string>((resolve, reject) =>
      client.SignCertificate({ id: '', token: '', trustDomain: '', namespace: '', certificateSigningRequest: Buffer.alloc(0) }, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(Buffer.from(res!.workloadCertificate).toString()))),
    );
  // a pool of its own: grpc-js shares a connection among channels of equal credentials and target
  const open = (creds: grpc.ChannelCredentials) => {
    const c = caClient(address, creds, { 'grpc.use_local_subchannel_pool': 1 });
    clients.push(c);
    return c;
  };

  it('presents the workload certificate, and after a rotation new connections present the new one while the old connection goes on', async () => {
    const clock = new ManualClock(Date.now());
    const manager = new IdentityManager({ id: { trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' }, signer: new LocalSigner({ trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: LIFE }), log: pino({ level: 'silent' }), clock });
    await manager.start();
    const creds = grpcClientCredentials(manager);
    const before = open(creds);
    const first = new X509Certificate(manager.current!.certPem).serialNumber;
    expect(await shown(before)).toBe(`${first} URI:spiffe://cluster.local/ns/orders/checkout`);
    let rotated = false;
    manager.onRotate(() => (rotated = true));
    for (let i = 0; i < 100 && !rotated; i++) {
      await clock.advance(1000);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(rotated).toBe(true);
    const second = new X509Certificate(manager.current!.certPem).serialNumber;
    expect(second).not.toBe(first);
    expect(await shown(open(creds))).toBe(`${second} URI:spiffe://cluster.local/ns/orders/checkout`);
    expect(await shown(before)).toBe(`${first} URI:spiffe://cluster.local/ns/orders/checkout`);
    manager.close();
  });

  it('checks the server against the trust bundle and this trust domain; a client without a certificate gets nothing', async () => {
    const manager = new IdentityManager({ id: { trustDomain: 'example.org', namespace: 'orders', appId: 'checkout' }, signer: new LocalSigner({ trustDomain: 'example.org', ca, trustBundlePem: ca.certPem, ttlMs: LIFE }), log: pino({ level: 'silent' }) });
    await manager.start();
    // the server's certificate is of cluster.local: not this sidecar's trust domain
    await expect(shown(open(grpcClientCredentials(manager)))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    // with the server's CA file given, the server is checked by it (and its host name: not an IP SAN here)
    await expect(shown(open(grpcClientCredentials(manager, { caPem: Buffer.from(ca.certPem), checkServerIdentity: () => undefined })))).resolves.toMatch(/spiffe:\/\/example.org\/ns\/orders\/checkout/);
    // no client certificate: refused
    await expect(shown(open(grpc.credentials.createSsl(Buffer.from(ca.certPem), null, null, { checkServerIdentity: () => undefined })))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    manager.close();
  });

  it('root rotation: a service re-signed by the new root verifies through the renewed bundle, though the CA file is the old root only', async () => {
    // the CA file (RT_SCHEDULER_TLS_CA_FILE) is the pod's anchors at admission: the old root; the
    // bundle the sidecar's certificate came with holds both roots (step 1 of docs/identity.md)
    const next = await createRootCa({ commonName: 'next root', ttlMs: 24 * 3_600_000 });
    const key = newWorkloadKey();
    const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'rt-system', appId: 'rt-scheduler' });
    const both = `${ca.certPem}${next.certPem}`;
    const resigned = await issueFor({ trustDomain: 'cluster.local', ca: next, trustBundlePem: both, ttlMs: LIFE }, { namespace: 'rt-system', appId: 'rt-scheduler' }, { id: '', namespace: '', trustDomain: '', csrPem });
    const rotated = new grpc.Server();
    rotated.addService(caService(), {
      SignCertificate: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { workloadCertificate: Buffer.from('rotated'), trustChainCertificates: [] }),
    });
    const port = await new Promise<number>((resolve, reject) =>
      rotated.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createSsl(Buffer.from(both), [{ cert_chain: Buffer.from(resigned.certPem), private_key: Buffer.from(key.keyPem) }], true), (e, p) => (e ? reject(e) : resolve(p))),
    );
    const at = (creds: grpc.ChannelCredentials) => {
      const c = caClient(`127.0.0.1:${port}`, creds, { 'grpc.use_local_subchannel_pool': 1 });
      clients.push(c);
      return c;
    };
    const oldOnly = new IdentityManager({ id: { trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' }, signer: new LocalSigner({ trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: LIFE }), log: pino({ level: 'silent' }) });
    const renewed = new IdentityManager({ id: { trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' }, signer: new LocalSigner({ trustDomain: 'cluster.local', ca, trustBundlePem: both, ttlMs: LIFE }), log: pino({ level: 'silent' }) });
    try {
      await oldOnly.start();
      await renewed.start();
      const caFile = Buffer.from(ca.certPem);
      const anyHost = () => undefined;
      // a sidecar whose bundle never got the new root cannot verify it (the check is real)
      await expect(shown(at(grpcClientCredentials(oldOnly, { caPem: caFile, checkServerIdentity: anyHost })))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      // one renewed after step 1 can, with the same CA file
      await expect(shown(at(grpcClientCredentials(renewed, { caPem: caFile, checkServerIdentity: anyHost })))).resolves.toBe('rotated');
    } finally {
      oldOnly.close();
      renewed.close();
      rotated.forceShutdown();
    }
  });
});
