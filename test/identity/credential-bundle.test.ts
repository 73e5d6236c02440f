/**
 * The kubelet's credential bundle (PodCertificateRequest path): key first, then the chain; read
 * as one, refused with a clear error when it is not a matching pair naming a workload.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CredentialBundleError, CredentialBundleSource, parseCredentialBundle } from '../../sidecar/src/identity/credential-bundle.ts';
import { IdentityManager } from '../../sidecar/src/identity/manager.ts';
import { ManualClock } from '../../shared/clock.ts';
import { issueFor } from '../../sidecar/src/identity/issue.ts';
import { createCsr, createRootCa, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';

async function issued(appId: string) {
  const ca = await createRootCa({ ttlMs: 3_600_000 });
  const key = newWorkloadKey();
  const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: 'shop', appId });
  const got = await issueFor({ trustDomain: 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: 3_600_000 }, { namespace: 'shop', appId }, { id: appId, namespace: 'shop', trustDomain: 'cluster.local', csrPem });
  return { keyPem: key.keyPem, certPem: got.certPem, caPem: ca.certPem };
}

describe('credential bundles', () => {
  it('reads the key and the chain as the kubelet writes them, and the workload the leaf names', async () => {
    const w = await issued('checkout');
    const b = parseCredentialBundle(`${w.keyPem}${w.certPem}${w.caPem}`);
    expect(b.id).toEqual({ trustDomain: 'cluster.local', namespace: 'shop', appId: 'checkout' });
    expect(b.keyPem).toBe(w.keyPem.endsWith('\n') ? w.keyPem : `${w.keyPem}\n`);
    expect(b.certPem).toContain(w.certPem.trim());
    // the self-signed root behind the chain is a root to trust, not part of what is presented
    expect(b.certPem).not.toContain(w.caPem.trim());
    expect(b.rootsPem.map((r) => r.trim())).toEqual([w.caPem.trim()]);
    expect(b.notAfter - b.notBefore).toBeGreaterThan(3_600_000);
  });

  it('refuses an empty file, a chain before its key, a key without a chain, a certificate of another key, a certificate naming no workload', async () => {
    const a = await issued('a');
    const b = await issued('b');
    expect(() => parseCredentialBundle('')).toThrow(/no PEM blocks/);
    expect(() => parseCredentialBundle(`${a.certPem}${a.keyPem}`)).toThrow(/begin with a PRIVATE KEY/);
    expect(() => parseCredentialBundle(a.keyPem)).toThrow(/certificate chain/);
    expect(() => parseCredentialBundle(`${a.keyPem}${b.certPem}`)).toThrow(/not for its key/);
    const caKey = await createRootCa({ ttlMs: 60_000 });
    expect(() => parseCredentialBundle(`${caKey.keyPem}${caKey.certPem}`)).toThrow(/names no workload/);
  });

  it('throws only CredentialBundleError, whatever the file holds (property)', () => {
    const pemish = fc.oneof(fc.string(), fc.constantFrom('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'));
    fc.assert(fc.property(fc.array(pemish, { maxLength: 4 }), (parts) => {
      try {
        parseCredentialBundle(parts.join(''));
      } catch (e) {
        expect(e).toBeInstanceOf(CredentialBundleError);
      }
    }));
  });
});

describe('the kubelet as the identity manager\'s source', () => {
  it('takes key and certificate from the bundle, the roots from the anchors file, and announces the kubelet\'s rotation once it lands', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rt-bundle-'));
    try {
      const first = await issued('checkout');
      const file = join(dir, 'workload-credentials.pem');
      const anchors = join(dir, 'trust-anchors.pem');
      writeFileSync(file, `${first.keyPem}${first.certPem}`);
      writeFileSync(anchors, first.caPem);
      const clock = new ManualClock(Date.now());
      const m = new IdentityManager({ id: { trustDomain: 'cluster.local', namespace: 'shop', appId: 'checkout' }, signer: new CredentialBundleSource(file, anchors), log: pino({ level: 'silent' }), clock, jitter: 0 });
      const rotations: string[] = [];
      m.onRotate((s) => rotations.push(s.certPem));
      await m.start();
      expect(m.current?.keyPem).toBe(parseCredentialBundle(`${first.keyPem}${first.certPem}`).keyPem);
      expect(m.bundlePem).toContain(first.caPem.trim());
      // renewal due, the kubelet not done yet: the same file, nothing announced, looked at again soon
      await clock.advance(0.75 * 3_600_000);
      expect(rotations).toHaveLength(1);
      expect(m.problem()).toBeUndefined();
      // the kubelet's refresh: the signer's roots ride behind the chain (a root rotation reaches the pod with it)
      const second = await issued('checkout');
      writeFileSync(file, `${second.keyPem}${second.certPem}${first.caPem}${second.caPem}`);
      await clock.advance(10_000);
      expect(rotations).toHaveLength(2);
      expect(m.current?.certPem).toContain(second.certPem.trim());
      expect(m.bundlePem).toContain(second.caPem.trim());
      // a bundle for another app is refused, and the current certificate stays
      const other = await issued('payments');
      writeFileSync(file, `${other.keyPem}${other.certPem}`);
      await clock.advance(0.75 * 3_600_000);
      expect(rotations).toHaveLength(2);
      m.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
