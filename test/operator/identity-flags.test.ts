/** The operator's identity flags and their env forms (parseIdentityFlags). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_WORKLOAD_CERT_TTL_MS, parseIdentityFlags } from '../../operator/src/issuer.ts';
import { formatDuration } from '../../shared/duration.ts';

describe('operator identity flags', () => {
  it('defaults: trust domain cluster.local, no issuer, no client certificates', () => {
    expect(parseIdentityFlags({}, {})).toEqual({ trustDomain: 'cluster.local', issuer: undefined, clientTrustBundleFile: undefined });
  });

  it('turns the issuer on with both CA files; the trust bundle defaults to the CA certificate; flags win over env', () => {
    const s = parseIdentityFlags({ 'identity-ca-cert-file': '/ca/tls.crt', 'identity-ca-key-file': '/ca/tls.key', 'workload-cert-ttl': '2m' }, { RT_TRUST_DOMAIN: 'example.org', RT_WORKLOAD_CERT_TTL: '1h' });
    expect(s).toEqual({
      trustDomain: 'example.org',
      issuer: { trustDomain: 'example.org', caCertFile: '/ca/tls.crt', caKeyFile: '/ca/tls.key', trustBundleFile: undefined, ttlMs: 120_000 },
      clientTrustBundleFile: '/ca/tls.crt',
    });
    const e = parseIdentityFlags({}, { RT_IDENTITY_CA_CERT_FILE: '/c', RT_IDENTITY_CA_KEY_FILE: '/k', RT_IDENTITY_TRUST_BUNDLE_FILE: '/b' });
    expect(e.issuer).toMatchObject({ trustBundleFile: '/b', ttlMs: DEFAULT_WORKLOAD_CERT_TTL_MS });
    expect(e.clientTrustBundleFile).toBe('/b');
    // a trust bundle alone: certificates are accepted, none are issued
    expect(parseIdentityFlags({ 'identity-trust-bundle-file': '/b' }, {})).toMatchObject({ issuer: undefined, clientTrustBundleFile: '/b' });
  });

  it('refuses one CA file without the other, a bad trust domain and a TTL outside 1m..8760h, naming the flag', () => {
    expect(() => parseIdentityFlags({ 'identity-ca-cert-file': '/c' }, {})).toThrow(/--identity-ca-cert-file and --identity-ca-key-file go together/);
    expect(() => parseIdentityFlags({ 'trust-domain': 'Bad/Domain' }, {})).toThrow(/--trust-domain: trust domain "Bad\/Domain"/);
    for (const t of ['30s', '0', 'soon', '9000h', '-1h']) expect(() => parseIdentityFlags({ 'workload-cert-ttl': t }, {})).toThrow(/--workload-cert-ttl must be a duration from 1m to 8760h/);
  });

  it('takes every TTL from 1m to 8760h as formatted, and only those (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9_000 * 60 }), (minutes) => {
        const ms = minutes * 60_000;
        const text = formatDuration(ms);
        const flags = { 'workload-cert-ttl': text, 'identity-ca-cert-file': '/c', 'identity-ca-key-file': '/k' };
        if (ms <= 8760 * 3_600_000) expect(parseIdentityFlags(flags, {}).issuer?.ttlMs).toBe(ms);
        else expect(() => parseIdentityFlags(flags, {})).toThrow(/--workload-cert-ttl/);
      }),
    );
  });

  it('never throws anything but an Error naming a flag, whatever the text (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (td, ttl) => {
        try {
          parseIdentityFlags({ 'trust-domain': td, 'workload-cert-ttl': ttl }, {});
        } catch (e) {
          expect((e as Error).message).toMatch(/^--(trust-domain|workload-cert-ttl)/);
        }
      }),
    );
  });
});
