/**
 * Workload identity's X.509 work with real TLS: a workload key and CSR, the issuer's checks, the
 * certificate it signs, and node:tls completing a mutual handshake on it in which each side reads
 * the other's SPIFFE ID. Refusals: another app id, namespace or trust domain, a CSR for another
 * identity, a tampered or non-PEM CSR, a key type that is not ECDSA.
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { connect, createServer, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { issueFor, type IssuerSettings } from '../../sidecar/src/identity/issue.ts';
import { certificateWorkload, parseSpiffeUri, sanUris, spiffeUri, type WorkloadId } from '../../shared/spiffe.ts';
import { createCsr, createRootCa, CsrError, newWorkloadKey, splitPemBundle } from '../../sidecar/src/identity/x509.ts';

const HOUR = 3_600_000;

async function issuer(ttlMs = HOUR): Promise<IssuerSettings> {
  const ca = await createRootCa({ ttlMs: 24 * HOUR });
  return { trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs };
}

async function workload(settings: IssuerSettings, ns: string, appId: string) {
  const key = newWorkloadKey();
  const csrPem = await createCsr(key, { trustDomain: settings.trustDomain, namespace: ns, appId });
  const issued = await issueFor(settings, { namespace: ns, appId }, { id: appId, namespace: ns, trustDomain: settings.trustDomain, csrPem });
  return { keyPem: key.keyPem, ...issued };
}

describe('workload certificates', () => {
  it('signs a CSR into a certificate with one critical SPIFFE URI SAN, client and server auth, backdated 15 min and capped by the CA', async () => {
    const s = await issuer();
    const before = Date.now();
    const w = await workload(s, 'orders', 'checkout');
    const cert = new X509Certificate(w.certPem);
    expect(cert.subjectAltName).toBe('URI:spiffe://cluster.local/ns/orders/checkout');
    expect(cert.ca).toBe(false);
    expect(cert.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']));
    expect(cert.checkIssued(new X509Certificate(s.ca.certPem))).toBe(true);
    expect(cert.verify(new X509Certificate(s.ca.certPem).publicKey)).toBe(true);
    expect(new Date(cert.validFrom).getTime()).toBeLessThanOrEqual(before - 14 * 60_000);
    expect(Math.abs(new Date(cert.validTo).getTime() - (before + HOUR))).toBeLessThan(5_000);
    expect(w.trustChainPems).toEqual(splitPemBundle(s.ca.certPem));
    // a TTL beyond the CA's own life ends with the CA
    const long = await workload({ ...s, ttlMs: 1000 * 24 * HOUR }, 'orders', 'checkout');
    expect(long.notAfter.getTime()).toBe(new Date(new X509Certificate(s.ca.certPem).validTo).getTime());
  });

  it('names the CA\'s own key identifier as the authority key id, so a CA made elsewhere (helm\'s genCA, openssl) verifies the chain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-aki-'));
    try {
      // an RSA root whose subject key identifier is none that @peculiar/x509 would compute
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'), '-subj', '/CN=elsewhere', '-days', '2', '-addext', 'subjectKeyIdentifier=0102030405', '-addext', 'authorityKeyIdentifier=none'], { stdio: 'ignore' });
      const ca = { certPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(dir, 'ca.key'), 'utf8') };
      const key = newWorkloadKey();
      const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' });
      const w = await issueFor({ trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: HOUR }, { namespace: 'orders', appId: 'checkout' }, { id: 'checkout', namespace: 'orders', trustDomain: 'cluster.local', csrPem });
      writeFileSync(join(dir, 'leaf.crt'), w.certPem);
      expect(execFileSync('openssl', ['verify', '-CAfile', join(dir, 'ca.crt'), join(dir, 'leaf.crt')]).toString()).toMatch(/leaf\.crt: OK/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('carries a mutual TLS handshake in which each side reads the other\'s SPIFFE ID; a certificate of another root is refused', async () => {
    const s = await issuer();
    const a = await workload(s, 'orders', 'checkout');
    const b = await workload(s, 'orders', 'payments');
    const server = createServer({ key: b.keyPem, cert: b.certPem, ca: s.trustBundlePem, requestCert: true, rejectUnauthorized: true }, (sock) => {
      sock.end(JSON.stringify(certificateWorkload(sock.getPeerCertificate())));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const dial = (key: string, cert: string) =>
      new Promise<{ peer?: WorkloadId; said: string; error?: string }>((resolve) => {
        const sock: TLSSocket = connect({ port, host: '127.0.0.1', key, cert, ca: s.trustBundlePem, checkServerIdentity: () => undefined }, () => {
          const peer = certificateWorkload(sock.getPeerCertificate());
          let said = '';
          sock.on('data', (d: Buffer) => (said += d.toString()));
          sock.on('end', () => resolve({ peer, said }));
        });
        sock.on('error', (e) => resolve({ said: '', error: e.message }));
      });
    try {
      const ok = await dial(a.keyPem, a.certPem);
      expect(ok.peer).toEqual({ trustDomain: 'cluster.local', namespace: 'orders', appId: 'payments' });
      expect(JSON.parse(ok.said)).toEqual({ trustDomain: 'cluster.local', namespace: 'orders', appId: 'checkout' });
      const other = await issuer();
      const stranger = await workload(other, 'orders', 'checkout');
      const refused = await dial(stranger.keyPem, stranger.certPem);
      expect(refused.said).toBe('');
    } finally {
      server.close();
    }
  });

  it('refuses an ask for another app, namespace or trust domain, and a CSR for another identity, issuing nothing', async () => {
    const s = await issuer();
    const key = newWorkloadKey();
    const me = { namespace: 'orders', appId: 'checkout' };
    const csrPem = await createCsr(key, { trustDomain: 'cluster.local', ...me });
    const ask = { id: 'checkout', namespace: 'orders', trustDomain: 'cluster.local', csrPem };
    await expect(issueFor(s, me, { ...ask, id: 'payments' })).rejects.toThrow(/names app id "payments", but the caller is "checkout"/);
    await expect(issueFor(s, me, { ...ask, namespace: 'billing' })).rejects.toThrow(/names namespace "billing"/);
    await expect(issueFor(s, me, { ...ask, trustDomain: 'example.org' })).rejects.toThrow(/signs for "cluster.local"/);
    const otherCsr = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'orders', appId: 'payments' });
    await expect(issueFor(s, me, { ...ask, csrPem: otherCsr })).rejects.toThrow(/CSR asks for spiffe:\/\/cluster.local\/ns\/orders\/payments, but the caller is spiffe:\/\/cluster.local\/ns\/orders\/checkout/);
    // empty fields in the ask are the verified identity's
    await expect(issueFor(s, me, { id: '', namespace: '', trustDomain: '', csrPem })).resolves.toMatchObject({ id: { appId: 'checkout', namespace: 'orders' } });
  });

  it('refuses a CSR that is empty, not PEM, tampered with, or over a key that is not ECDSA, with a CsrError', async () => {
    const s = await issuer();
    const me = { namespace: 'orders', appId: 'checkout' };
    const ask = (csrPem: string) => issueFor(s, me, { id: 'checkout', namespace: 'orders', trustDomain: 'cluster.local', csrPem });
    await expect(ask('')).rejects.toBeInstanceOf(CsrError);
    await expect(ask('hello')).rejects.toThrow(/not PEM/);
    const good = await createCsr(newWorkloadKey(), { trustDomain: 'cluster.local', ...me });
    const body = good.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
    const der = Buffer.from(body, 'base64');
    der[der.length - 10] ^= 0xff; // a byte of the signature
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    await expect(ask(tampered)).rejects.toThrow(/signature does not verify|cannot be parsed/);
    await expect(ask('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----')).rejects.toBeInstanceOf(CsrError);
    // an RSA key is refused: workload keys are ECDSA
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const { Pkcs10CertificateRequestGenerator } = await import('@peculiar/x509');
    const alg = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    const { createPublicKey } = await import('node:crypto');
    const rsaCsr = await Pkcs10CertificateRequestGenerator.create({ keys: { privateKey: rsa.toCryptoKey(alg, false, ['sign']), publicKey: createPublicKey(rsa).toCryptoKey(alg, true, ['verify']) } as never, signingAlgorithm: alg });
    await expect(ask(rsaCsr.toString('pem'))).rejects.toThrow(/ECDSA/);
  });
});

describe('SPIFFE IDs', () => {
  const segment = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
  it('round-trip through spiffeUri and parseSpiffeUri (property)', () => {
    fc.assert(fc.property(fc.stringMatching(/^[a-z0-9.]{1,30}$/), segment, fc.stringMatching(/^[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,40}$/), (trustDomain, namespace, appId) => {
      const id = { trustDomain, namespace, appId };
      expect(parseSpiffeUri(spiffeUri(id))).toEqual(id);
    }));
  });

  it('names no workload for anything else, and never throws on any string (property)', () => {
    for (const bad of ['spiffe://cluster.local/ns/orders', 'spiffe://cluster.local/ns/orders/a/b', 'spiffe://Cluster.local/ns/orders/a', 'https://cluster.local/ns/orders/a', 'spiffe://cluster.local/ns/Orders/a', 'spiffe://cluster.local/ns/orders/..', 'spiffe://cluster.local/ns/orders/a%2Fb']) {
      expect(parseSpiffeUri(bad)).toBeUndefined();
    }
    fc.assert(fc.property(fc.string(), (s) => {
      parseSpiffeUri(s);
      sanUris(s);
      certificateWorkload({ subjectaltname: s });
    }));
  });

  it('reads the URIs of a subjectAltName as node prints it, quoted ones too; two SPIFFE URIs name no one', () => {
    expect(sanUris('DNS:a.b, URI:spiffe://td/ns/n/a, IP Address:127.0.0.1')).toEqual(['spiffe://td/ns/n/a']);
    expect(sanUris('URI:"spiffe://td/ns/n/a,b"')).toEqual(['spiffe://td/ns/n/a,b']);
    expect(certificateWorkload({ subjectaltname: 'URI:spiffe://td/ns/n/a, URI:spiffe://td/ns/n/b' })).toBeUndefined();
    expect(certificateWorkload({ subjectaltname: 'URI:spiffe://td/ns/n/a' })).toEqual({ trustDomain: 'td', namespace: 'n', appId: 'a' });
  });
});
