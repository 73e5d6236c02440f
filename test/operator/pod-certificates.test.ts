/**
 * The rt.io/workload signer against a real kube-apiserver with PodCertificateRequests turned on
 * (beta in 1.35): requests made as the kubelet makes them (a key, its proof of possession over
 * the pod's uid) are settled once each. The API server itself checks every issued status (the
 * chain's key is the request's, notBefore near its clock, at least an hour of life, the refresh
 * time inside it), so an Issued request here is one the kubelet would project.
 */
import { createPublicKey, generateKeyPairSync, sign, X509Certificate, type KeyObject } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WORKLOAD_SIGNER, PodCertificateSigner, type PodCertificateRequest } from '../../operator/src/pod-certificates.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/config.ts';
import type { IssuerSettings } from '../../sidecar/src/identity/issue.ts';
import { certificateWorkload } from '../../shared/spiffe.ts';
import { createRootCa } from '../../sidecar/src/identity/x509.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, startKube, type KubeCluster } from '../services/kube.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');
const NS = 'pcr';
const HOUR = 3_600_000;

let kube: KubeCluster;
let client: KubeClient;
let signer: PodCertificateSigner;
let issuer: IssuerSettings;
const decisions: string[] = [];

async function ok(r: Promise<{ status: number; body: unknown; text: string }>): Promise<{ metadata: { uid: string } }> {
  const res = await r;
  if (res.status >= 300) throw new Error(`${res.status}: ${res.text}`);
  return res.body as { metadata: { uid: string } };
}

beforeAll(async () => {
  if (!available) return;
  kube = await startKube({ controllers: false });
  client = new KubeClient(loadKubeconfig(kube.kubeconfig));
  const ca = await createRootCa({ ttlMs: 48 * HOUR });
  issuer = { trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: 24 * HOUR };
  await ok(kube.request('POST', '/api/v1/namespaces', { metadata: { name: NS } }));
  await ok(kube.request('POST', '/api/v1/nodes', { metadata: { name: 'node-a' } }));
  await ok(kube.request('POST', `/api/v1/namespaces/${NS}/serviceaccounts`, { metadata: { name: 'shop' } }));
  signer = new PodCertificateSigner({ client, log: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }), issuer: () => issuer, onDecision: (kind, pcr) => decisions.push(`${pcr.metadata.name}:${kind}`) });
  signer.start();
  await signer.whenSynced();
}, 180_000);

afterAll(async () => {
  await signer?.stop();
  client?.close();
  await kube?.stop();
});

/** A pod bound to node-a (nothing runs it: the signer only reads it). */
async function pod(name: string, annotations: Record<string, string> = { 'rt.io/app-id': name }): Promise<string> {
  const p = await ok(kube.request('POST', `/api/v1/namespaces/${NS}/pods`, { metadata: { name, annotations }, spec: { serviceAccountName: 'shop', nodeName: 'node-a', containers: [{ name: 'app', image: 'app:1' }] } }));
  return p.metadata.uid;
}

/** A request as the kubelet makes one: the key's SPKI and an ECDSA/RSA-PSS signature over the pod uid. */
async function request(name: string, podName: string, podUid: string, key: KeyObject, extra: Partial<PodCertificateRequest['spec']> = {}): Promise<void> {
  const node = (await kube.request('GET', '/api/v1/nodes/node-a')).body as { metadata: { uid: string } };
  const sa = (await kube.request('GET', `/api/v1/namespaces/${NS}/serviceaccounts/shop`)).body as { metadata: { uid: string } };
  const rsa = key.asymmetricKeyType === 'rsa';
  const proof = sign('sha256', Buffer.from(podUid), rsa ? { key, padding: 6 /* RSA_PKCS1_PSS_PADDING */, saltLength: 32 } : key);
  await ok(
    kube.request('POST', `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests`, {
      metadata: { name },
      spec: {
        signerName: WORKLOAD_SIGNER,
        podName,
        podUID: podUid,
        serviceAccountName: 'shop',
        serviceAccountUID: sa.metadata.uid,
        nodeName: 'node-a',
        nodeUID: node.metadata.uid,
        maxExpirationSeconds: 86400,
        pkixPublicKey: createPublicKey(key).export({ type: 'spki', format: 'der' }).toString('base64'),
        proofOfPossession: proof.toString('base64'),
        ...extra,
      },
    }),
  );
}

async function settled(name: string): Promise<NonNullable<PodCertificateRequest['status']>> {
  let status: PodCertificateRequest['status'];
  await vi.waitFor(
    async () => {
      status = ((await kube.request('GET', `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests/${name}`)).body as PodCertificateRequest).status;
      expect(status?.conditions?.length).toBeGreaterThan(0);
    },
    { timeout: 20_000, interval: 100 },
  );
  return status!;
}

const ecKey = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

describe.skipIf(!available)('the rt.io/workload PodCertificateRequest signer (real kube-apiserver, feature on)', () => {
  it('issues the pod its SPIFFE certificate: times the API server accepts, the request\'s key, the CA\'s signature', async () => {
    const uid = await pod('checkout');
    const key = ecKey();
    await request('checkout-1', 'checkout', uid, key);
    const status = await settled('checkout-1');
    expect(status.conditions).toEqual([expect.objectContaining({ type: 'Issued', status: 'True', reason: 'Issued', message: 'signed spiffe://cluster.local/ns/pcr/checkout' })]);
    const cert = new X509Certificate(status.certificateChain!);
    expect(certificateWorkload(cert)).toEqual({ trustDomain: 'cluster.local', namespace: NS, appId: 'checkout' });
    expect(cert.publicKey.export({ type: 'spki', format: 'der' })).toEqual(createPublicKey(key).export({ type: 'spki', format: 'der' }));
    expect(cert.verify(new X509Certificate(issuer.ca.certPem).publicKey)).toBe(true);
    // the trust bundle rides behind the leaf, for the pod to follow a root rotation
    expect(status.certificateChain!.trim().endsWith(issuer.trustBundlePem.trim())).toBe(true);
    const life = new Date(status.notAfter!).getTime() - new Date(status.notBefore!).getTime();
    expect(life).toBe(24 * HOUR);
    expect(new Date(status.beginRefreshAt!).getTime() - new Date(status.notBefore!).getTime()).toBeCloseTo(0.7 * life, -4);
  });

  it('gives at least the hour the API server asks when rt\'s TTL is shorter, and never more than maxExpirationSeconds', async () => {
    const before = issuer;
    issuer = { ...issuer, ttlMs: 2 * 60_000 };
    try {
      const uid = await pod('short');
      await request('short-1', 'short', uid, ecKey(), { maxExpirationSeconds: 7200 });
      const status = await settled('short-1');
      expect(status.conditions?.[0].type).toBe('Issued');
      expect(new Date(status.notAfter!).getTime() - new Date(status.notBefore!).getTime()).toBe(HOUR);
    } finally {
      issuer = before;
    }
    const uid = await pod('capped');
    await request('capped-1', 'capped', uid, ecKey(), { maxExpirationSeconds: 3 * 3600 });
    const status = await settled('capped-1');
    expect(new Date(status.notAfter!).getTime() - new Date(status.notBefore!).getTime()).toBe(3 * HOUR);
  });

  it('denies, with a reason and no certificate: a pod that is gone, a pod without rt.io/app-id, another service account, user annotations, an RSA key', async () => {
    const cases: Array<[string, () => Promise<void>, string]> = [
      ['gone-1', async () => request('gone-1', 'nobody', '0b5ad1c8-0000-4000-8000-000000000000', ecKey()), 'PodGone'],
      ['anon-1', async () => request('anon-1', 'anon', await pod('anon', {}), ecKey()), 'NoAppId'],
      ['sa-1', async () => request('sa-1', 'sa', await pod('sa'), ecKey(), { serviceAccountName: 'other' }), 'ServiceAccountMismatch'],
      ['notes-1', async () => request('notes-1', 'notes', await pod('notes'), ecKey(), { unverifiedUserAnnotations: { 'example.com/x': 'y' } }), 'UnknownAnnotations'],
      ['rsa-1', async () => request('rsa-1', 'rsa', await pod('rsa'), generateKeyPairSync('rsa', { modulusLength: 3072 }).privateKey), 'UnsupportedKeyType'],
    ];
    for (const [, make] of cases) await make();
    for (const [name, , reason] of cases) {
      const status = await settled(name);
      expect(status.conditions, name).toEqual([expect.objectContaining({ type: 'Denied', status: 'True', reason })]);
      expect(status.certificateChain, name).toBeUndefined();
    }
  });

  it('leaves other signers\' requests alone and settles each of its own once', async () => {
    const uid = await pod('other-signer');
    await request('other-1', 'other-signer', uid, ecKey(), { signerName: 'example.com/signer' });
    const uid2 = await pod('once');
    await request('once-1', 'once', uid2, ecKey());
    await settled('once-1');
    const other = ((await kube.request('GET', `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests/other-1`)).body as PodCertificateRequest).status;
    expect(other?.conditions ?? []).toEqual([]);
    expect(decisions.filter((d) => d.startsWith('once-1:'))).toEqual(['once-1:Issued']);
    expect(decisions.some((d) => d.startsWith('other-1:'))).toBe(false);
  });
});
