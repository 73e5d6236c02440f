/**
 * `rt placement` with mutual TLS (--identity-trust-bundle-file): hosts need a workload certificate
 * from the trust bundle to connect, and report as the app of their certificate.
 */
import { writeFileSync } from 'node:fs';
import { checkServerIdentity } from 'node:tls';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePlacementArgs, startPlacementProcess, type RunningPlacement } from '../../placement/src/main.ts';
import { createRemotePlacement, type RemotePlacement } from '../../sidecar/src/actors/placement/remote.ts';
import { issueFor, type IssuerSettings } from '../../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';
import { tempDir, waitFor } from '../jobs/helpers.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { freePort } from '../services/net.ts';
import { quiet } from './harness.ts';

const TD = 'cluster.local';

describe('rt placement with mutual TLS', () => {
  const dir = tempDir('rt-placement-mtls-');
  let serving: TestCa;
  let identity: IssuerSettings;
  let placement: RunningPlacement;
  let address: string;
  const hosts: RemotePlacement[] = [];
  /** Host reports the service refused (it logs each). */
  let refusedReports = 0;
  const placementLog = pino({ level: 'warn' }, { write: (line: string) => void (line.includes('refused a host report') && refusedReports++) });

  beforeAll(async () => {
    serving = makeTestCa();
    const root = await createRootCa({ ttlMs: 3_600_000 });
    identity = { trustDomain: TD, ca: root, trustBundlePem: root.certPem, ttlMs: 3_600_000 };
    writeFileSync(join(dir.path, 'tls.crt'), serving.cert);
    writeFileSync(join(dir.path, 'tls.key'), serving.key);
    writeFileSync(join(dir.path, 'bundle.pem'), root.certPem);
    const port = await freePort();
    const o = parsePlacementArgs(['--port', String(port), '--tls-cert-file', join(dir.path, 'tls.crt'), '--tls-key-file', join(dir.path, 'tls.key'), '--identity-trust-bundle-file', join(dir.path, 'bundle.pem')]);
    if (o === 'help') throw new Error('help');
    placement = await startPlacementProcess(o, placementLog);
    address = `127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await Promise.all(hosts.map((h) => h.close()));
    await placement?.close();
    serving?.remove();
    dir.remove();
  });

  const credentialsOf = async (namespace: string, appId: string) => {
    const key = newWorkloadKey();
    const issued = await issueFor(identity, { namespace, appId }, { id: appId, namespace, trustDomain: TD, csrPem: await createCsr(key, { trustDomain: TD, namespace, appId }) });
    return grpc.credentials.createSsl(Buffer.from(serving.caPem), Buffer.from(key.keyPem), Buffer.from(issued.certPem));
  };
  let port = 42000;
  const host = (appId: string, credentials?: grpc.ChannelCredentials, namespace = 'shop') => {
    const h = createRemotePlacement({ addresses: [address], appId, namespace, hostAddress: `127.0.0.1:${port++}`, hostedTypes: ['cart'], log: quiet, credentials, tlsCa: Buffer.from(serving.caPem) });
    hosts.push(h);
    return h;
  };

  it('serves hosts with a workload certificate; one that claims another app, or has no certificate, never joins', async () => {
    const orders = host('orders', await credentialsOf('shop', 'orders'));
    const billing = host('billing', await credentialsOf('shop', 'billing'));
    // a certificate of "orders", reporting as "billing"
    const liar = host('billing', await credentialsOf('shop', 'orders'));
    // server-side TLS only: no client certificate; each TLS handshake it starts is one try
    let anonymousTries = 0;
    const counting = grpc.credentials.createSsl(Buffer.from(serving.caPem), null, null, {
      checkServerIdentity: (name, cert) => {
        anonymousTries++;
        return checkServerIdentity(name, cert);
      },
    });
    const anonymous = host('anonymous', counting);
    await waitFor(() => [orders, billing].every((h) => !h.locked) && orders.version === billing.version && placement.service.snapshot().hosts === 2, 10_000, 'two hosts');
    const apps = new Set(Array.from({ length: 200 }, (_, i) => orders.lookup('cart', `c-${i}`)!.appId));
    expect([...apps].sort()).toEqual(['billing', 'orders']);
    // the other two have tried (and been refused) more than once
    await waitFor(() => refusedReports >= 2 && anonymousTries >= 2, 10_000, 'refused twice');
    expect(liar.locked && anonymous.locked).toBe(true);
    expect(placement.service.snapshot().hosts).toBe(2);
  });
});
