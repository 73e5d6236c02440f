/**
 * The operator's workload-certificate issuer (dapr.proto.sentry.v1.CA/SignCertificate) against a
 * real kube-apiserver: real ServiceAccounts, Pods and bound tokens, real TokenReview. The signing
 * CA is an RSA root made by openssl as helm's genCA makes it, so signing with an RSA CA key is
 * covered. Also: the CA files rotated under a running operator, the metrics' counts, and
 * WatchResources taking a workload certificate in place of the token.
 *
 * The API server issues tokens for at least 10 minutes, so the expired token is a real bound
 * token re-dated into the past and signed again with the cluster's own service-account key (and,
 * as the control, the same token re-dated into the future, which is accepted).
 */
import { execFileSync } from 'node:child_process';
import { createPrivateKey, sign as signWith, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { caClient, type SignCertificateResponse } from '../../sidecar/src/identity/proto.ts';
import { certificateWorkload } from '../../shared/spiffe.ts';
import { createCsr, createRootCa, newWorkloadKey, type SigningCa } from '../../sidecar/src/identity/x509.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable } from '../services/kube.ts';
import { type OperatorBed, startOperatorBed, watchAs } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');

const TTL_MS = 2 * 60_000;
const TD = 'cluster.local';

/** An RSA 2048 root as helm's genCA makes one (CA:TRUE, certSign). */
function rsaRoot(cn: string): SigningCa {
  const dir = mkdtempSync(join(tmpdir(), 'rt-rsa-ca-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'), '-subj', `/CN=${cn}`, '-days', '2',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment'], { stdio: ['ignore', 'ignore', 'pipe'] });
    return { certPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(dir, 'ca.key'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(!available)('the operator issues workload certificates', () => {
  let bed: OperatorBed;
  let root: SigningCa;
  const ns = 'orders';

  beforeAll(async () => {
    root = rsaRoot('rt identity test root');
    bed = await startOperatorBed({ issuer: { caCertPem: root.certPem, caKeyPem: root.keyPem, ttlMs: TTL_MS } });
    await bed.namespace(ns);
  }, 180_000);

  afterAll(async () => {
    await bed?.stop();
  });

  const tokenOf = async (pod: string, appId: string, o?: { audience?: string }) => readFileSync(await bed.identity(ns, pod, appId, o), 'utf8').trim();

  /** A SignCertificate call as a sidecar makes it (TLS to the operator, trusting its serving CA). */
  async function sign(req: { token: string; appId: string; csrFor?: { namespace: string; appId: string }; csr?: string; namespace?: string }) {
    const key = newWorkloadKey();
    const csr = req.csr ?? (await createCsr(key, { trustDomain: TD, ...(req.csrFor ?? { namespace: req.namespace ?? ns, appId: req.appId }) }));
    const client = caClient(`127.0.0.1:${bed.port}`, grpc.credentials.createSsl(Buffer.from(bed.ca.caPem)));
    try {
      const res = await new Promise<SignCertificateResponse>((resolve, reject) =>
        client.SignCertificate(
          { id: req.appId, token: req.token, trustDomain: TD, namespace: req.namespace ?? ns, certificateSigningRequest: Buffer.from(csr) },
          new grpc.Metadata(),
          { deadline: Date.now() + 20_000 },
          (err, r) => (err ? reject(err) : resolve(r!)),
        ),
      );
      return { key, res };
    } finally {
      client.close();
    }
  }

  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => {
        throw new Error('a certificate was issued');
      },
      (e: grpc.ServiceError) => e,
    );

  it('signs for the pod of the token: the SPIFFE ID is its namespace and rt.io/app-id, chained to the RSA root, living the configured TTL', async () => {
    const token = await tokenOf('checkout-1', 'checkout');
    const before = Date.now();
    const { res } = await sign({ token, appId: 'checkout' });
    const cert = new X509Certificate(res.workloadCertificate);
    expect(certificateWorkload({ subjectAltName: cert.subjectAltName })).toEqual({ trustDomain: TD, namespace: ns, appId: 'checkout' });
    const rootCert = new X509Certificate(root.certPem);
    expect(cert.checkIssued(rootCert)).toBe(true);
    expect(cert.verify(rootCert.publicKey)).toBe(true);
    expect(res.trustChainCertificates.map((b) => new X509Certificate(b).fingerprint256)).toEqual([rootCert.fingerprint256]);
    const until = Number(res.validUntil!.seconds) * 1000;
    expect(until).toBe(new Date(cert.validTo).getTime());
    expect(until).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + TTL_MS - 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + TTL_MS);
    // an empty id and namespace mean "whatever I am"
    const again = await sign({ token, appId: '', namespace: '', csrFor: { namespace: ns, appId: 'checkout' } });
    expect(new X509Certificate(again.res.workloadCertificate).subjectAltName).toBe(`URI:spiffe://${TD}/ns/${ns}/checkout`);
  });

  it('refuses another app id, another namespace and a CSR for another identity with PERMISSION_DENIED', async () => {
    const token = await tokenOf('cart-1', 'cart');
    const e1 = await refusal(sign({ token, appId: 'payments' }));
    expect(e1.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(e1.details).toMatch(/names app id "payments", but the caller is "cart"/);
    const e2 = await refusal(sign({ token, appId: 'cart', namespace: 'billing', csrFor: { namespace: ns, appId: 'cart' } }));
    expect(e2.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(e2.details).toMatch(/namespace "billing"/);
    const e3 = await refusal(sign({ token, appId: 'cart', csrFor: { namespace: ns, appId: 'payments' } }));
    expect(e3.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(e3.details).toMatch(/CSR asks for spiffe:\/\/cluster\.local\/ns\/orders\/payments, but the caller is spiffe:\/\/cluster\.local\/ns\/orders\/cart/);
  });

  it('refuses a missing, forged, unbound or wrong-audience token, and the token of a deleted pod, with UNAUTHENTICATED', async () => {
    const token = await tokenOf('ship-1', 'ship');
    const [h, p] = token.split('.');
    const forged = `${h}.${p}.${Buffer.from('not-the-signature').toString('base64url')}`;
    await bed.kubectl(['create', 'serviceaccount', 'loose', '-n', ns]);
    const unbound = await bed.kube.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts/loose/token`, { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['rt.io/operator'], expirationSeconds: 600 } });
    expect(unbound.status).toBe(201);
    const wrongAudience = await tokenOf('ship-aud', 'ship', { audience: 'https://kubernetes.default.svc.cluster.local' });
    const gone = await tokenOf('ship-gone', 'ship');
    await bed.kubectl(['delete', 'pod', 'ship-gone', '-n', ns, '--wait=true']);
    const cases: [string, string, RegExp][] = [
      ['missing', '', /no service-account token/],
      ['forged', forged, /token refused by the API server/],
      ['unbound', (unbound.body as { status: { token: string } }).status.token, /not bound to a pod/],
      ['wrong audience', wrongAudience, /token refused|audience/],
      ['deleted pod', gone, /token refused|no longer exists|cannot be read/],
    ];
    for (const [what, t, msg] of cases) {
      const e = await refusal(sign({ token: t, appId: 'ship' }));
      expect({ what, code: e.code }).toEqual({ what, code: grpc.status.UNAUTHENTICATED });
      expect(e.details).toMatch(msg);
      expect(e.details).not.toContain(t || 'never');
    }
  });

  it('refuses an expired token with UNAUTHENTICATED (the same token re-dated into the future is accepted)', async () => {
    const token = await tokenOf('ship-old', 'ship');
    const [h, p] = token.split('.');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const saKey = createPrivateKey(readFileSync(bed.kube.controlPlane.pki.saKeyFile));
    /** The token with its times moved by `shiftS` seconds, signed RS256 by the cluster's service-account key. */
    const redated = (shiftS: number) => {
      const moved = { ...claims, iat: Number(claims.iat) + shiftS, nbf: Number(claims.nbf) + shiftS, exp: Number(claims.exp) + shiftS };
      const body = `${h}.${Buffer.from(JSON.stringify(moved)).toString('base64url')}`;
      return `${body}.${signWith('sha256', Buffer.from(body), saKey).toString('base64url')}`;
    };
    const lifeS = Number(claims.exp) - Number(claims.iat);
    // the control: re-signed but still valid, it gets a certificate
    const { res } = await sign({ token: redated(60), appId: 'ship' });
    expect(certificateWorkload(new X509Certificate(Buffer.from(res.workloadCertificate)))?.appId).toBe('ship');
    // expired an hour ago
    const expired = redated(-(lifeS + 3600));
    const e = await refusal(sign({ token: expired, appId: 'ship' }));
    expect(e.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(e.details).toMatch(/token refused by the API server/);
    expect(e.details).not.toContain(expired);
  });

  it('refuses a CSR that is not PEM, does not parse or whose signature does not verify with INVALID_ARGUMENT', async () => {
    const token = await tokenOf('bad-1', 'bad');
    const good = await createCsr(newWorkloadKey(), { trustDomain: TD, namespace: ns, appId: 'bad' });
    const body = good.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
    const der = Buffer.from(body, 'base64');
    der[der.length - 5] ^= 0xff; // inside the signature
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64').replace(/.{64}/g, '$&\n')}\n-----END CERTIFICATE REQUEST-----\n`;
    for (const [csr, msg] of [
      ['', /empty/],
      ['hello', /not PEM/],
      ['-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n', /cannot be parsed/],
      [tampered, /signature does not verify|cannot be parsed/],
    ] as const) {
      const e = await refusal(sign({ token, appId: 'bad', csr }));
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(e.details).toMatch(msg);
    }
  });

  it('counts what it issued and refused', () => {
    const issuer = bed.operator.issuer!;
    expect(issuer.issued).toBeGreaterThanOrEqual(2);
    expect(issuer.refused.get('PERMISSION_DENIED')).toBeGreaterThanOrEqual(3);
    expect(issuer.refused.get('UNAUTHENTICATED')).toBeGreaterThanOrEqual(5);
    expect(issuer.refused.get('INVALID_ARGUMENT')).toBeGreaterThanOrEqual(4);
  });

  it('serves WatchResources to a workload certificate instead of a token, scoped to its namespace and app id', async () => {
    const token = await tokenOf('inventory-1', 'inventory');
    const { key, res } = await sign({ token, appId: 'inventory' });
    const certPem = res.workloadCertificate.toString();
    const ok = watchAs(bed, '', { namespace: ns, appId: 'inventory' }, { keyPem: key.keyPem, certPem });
    try {
      await vi.waitFor(() => expect(ok.snapshots.length).toBe(1), { timeout: 15_000 });
      expect(ok.snapshots[0].appId).toBe('inventory');
    } finally {
      ok.close();
    }
    const other = watchAs(bed, '', { namespace: ns, appId: 'checkout' }, { keyPem: key.keyPem, certPem });
    try {
      await vi.waitFor(() => expect(other.error()).toBeDefined(), { timeout: 15_000 });
      expect(other.error()!.code).toBe(grpc.status.PERMISSION_DENIED);
      expect(other.error()!.details).toMatch(/app id "checkout" is not the app id of its client certificate \("inventory"\)/);
      expect(other.snapshots).toEqual([]);
    } finally {
      other.close();
    }
    // a certificate from a root outside the trust bundle proves nothing: without a token, refused
    const stranger = await createRootCa({ ttlMs: 3_600_000 });
    const { issueFor } = await import('../../sidecar/src/identity/issue.ts');
    const k2 = newWorkloadKey();
    const foreign = await issueFor({ trustDomain: TD, ca: stranger, trustBundlePem: stranger.certPem, ttlMs: 3_600_000 }, { namespace: ns, appId: 'inventory' }, { id: 'inventory', namespace: ns, trustDomain: TD, csrPem: await createCsr(k2, { trustDomain: TD, namespace: ns, appId: 'inventory' }) });
    const f = watchAs(bed, '', {}, { keyPem: k2.keyPem, certPem: foreign.certPem });
    try {
      await vi.waitFor(() => expect(f.error()).toBeDefined(), { timeout: 15_000 });
      expect(f.error()!.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(f.snapshots).toEqual([]);
    } finally {
      f.close();
    }
  });

  it('follows a root rotation without a restart: two roots in the bundle, then the new CA signs', async () => {
    const token = await tokenOf('rotate-1', 'rotate');
    const next = await createRootCa({ commonName: 'rt identity next root', ttlMs: 24 * 3_600_000 });
    // step 1: the bundle holds both roots, the old CA still signs
    writeFileSync(bed.issuerFiles.trustBundleFile, root.certPem + next.certPem);
    await vi.waitFor(async () => expect((await sign({ token, appId: 'rotate' })).res.trustChainCertificates.length).toBe(2), { timeout: 10_000, interval: 300 });
    // step 2: the new CA signs (an EC key this time); certificates chain to it
    writeFileSync(bed.issuerFiles.caKeyFile, next.keyPem);
    writeFileSync(bed.issuerFiles.caCertFile, next.certPem);
    const nextCert = new X509Certificate(next.certPem);
    await vi.waitFor(async () => expect(new X509Certificate((await sign({ token, appId: 'rotate' })).res.workloadCertificate).checkIssued(nextCert)).toBe(true), { timeout: 10_000, interval: 300 });
    // a half-written pair (key of one CA, certificate of the other) is not taken: it keeps signing with the last good one
    // the marker: the issuer re-reads its files at most once a second; it says when it refuses them
    const issuer = bed.operator.issuer as unknown as { log: { warn(msg: string): void }; settings: unknown };
    const warn = vi.spyOn(issuer.log, 'warn');
    try {
      writeFileSync(bed.issuerFiles.caKeyFile, root.keyPem);
      await vi.waitFor(() => {
        void issuer.settings;
        expect(warn.mock.calls.some(([m]) => /identity CA files cannot be loaded.*do not belong together/.test(String(m)))).toBe(true);
      }, { timeout: 10_000, interval: 100 });
    } finally {
      warn.mockRestore();
    }
    expect(new X509Certificate((await sign({ token, appId: 'rotate' })).res.workloadCertificate).checkIssued(nextCert)).toBe(true);
    writeFileSync(bed.issuerFiles.caKeyFile, next.keyPem);
  });
});
