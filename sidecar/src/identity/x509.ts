/**
 * The X.509 work of workload identity: a workload's key and CSR, the issuer's check of a CSR, and
 * the signing of a workload certificate or a root. @peculiar/x509 (over WebCrypto) builds and reads
 * the ASN.1; node:crypto makes and holds the keys. The library is loaded with the first call, so a
 * sidecar without identity never evaluates it.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, webcrypto, X509Certificate, type KeyObject } from 'node:crypto';
import type * as X509Lib from '@peculiar/x509';
import { spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';

type X509 = typeof X509Lib;
let lib: Promise<X509> | undefined;

async function x509(): Promise<X509> {
  lib ??= (async () => {
    // @peculiar/x509's dependency injection (tsyringe) needs the Reflect metadata API
    await import('reflect-metadata');
    const m = await import('@peculiar/x509');
    m.cryptoProvider.set(webcrypto as never);
    return m;
  })();
  return lib;
}

const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A CSR or request the issuer refuses; the message says why and is safe to return to the caller. */
export class CsrError extends Error {}

/** A private key and its certificate chain (leaf first), PEM; what node:tls takes as key and cert. */
export interface KeyAndChain {
  keyPem: string;
  certPem: string;
}

/** A signing authority: its certificate (PEM) and private key (PEM: EC or RSA). */
export interface SigningCa {
  certPem: string;
  keyPem: string;
}

export interface WorkloadKey {
  /** PKCS#8 PEM: handed to node:tls, never sent anywhere. */
  keyPem: string;
  key: KeyObject;
}

/** PEM as files and node:crypto write it, ending in a newline, so that PEMs joined make a valid bundle (@peculiar/x509 ends without one). */
function pemText(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/** A fresh ECDSA P-256 key, made in this process. */
export function newWorkloadKey(): WorkloadKey {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { key: privateKey, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

function cryptoKeyPair(key: KeyObject): webcrypto.CryptoKeyPair {
  const publicKey = createPublicKey(key);
  return {
    privateKey: key.toCryptoKey(ECDSA_P256, false, ['sign']) as webcrypto.CryptoKey,
    publicKey: publicKey.toCryptoKey(ECDSA_P256, true, ['verify']) as webcrypto.CryptoKey,
  };
}

/** A PKCS#10 request for `id`, signed with the workload's key: its one SAN is the SPIFFE URI. */
export async function createCsr(key: WorkloadKey, id: WorkloadId): Promise<string> {
  const x = await x509();
  const csr = await x.Pkcs10CertificateRequestGenerator.create({
    keys: cryptoKeyPair(key.key),
    signingAlgorithm: ECDSA_P256,
    extensions: [new x.SubjectAlternativeNameExtension([{ type: 'url', value: spiffeUri(id) }])],
  });
  return pemText(csr.toString('pem'));
}

export interface CheckedCsr {
  /** The URIs the CSR asks for (its SAN extension), possibly none. */
  uris: string[];
  /** Its public key, proven held by the requester (the CSR's signature verifies with it). */
  publicKey: X509Lib.PublicKey;
}

const MAX_CSR_BYTES = 16 * 1024;

/** Parses a PEM CSR and checks its self-signature; throws CsrError on anything else. */
export async function checkCsr(pem: string | Uint8Array): Promise<CheckedCsr> {
  const text = typeof pem === 'string' ? pem : Buffer.from(pem).toString('utf8');
  if (text.length === 0) throw new CsrError('no certificate signing request (certificate_signing_request is empty)');
  if (text.length > MAX_CSR_BYTES) throw new CsrError(`certificate signing request is larger than ${MAX_CSR_BYTES} bytes`);
  if (!/^-----BEGIN (NEW )?CERTIFICATE REQUEST-----/.test(text.trimStart())) throw new CsrError('certificate signing request is not PEM (-----BEGIN CERTIFICATE REQUEST-----)');
  const x = await x509();
  let csr: X509Lib.Pkcs10CertificateRequest;
  try {
    csr = new x.Pkcs10CertificateRequest(text.trim());
  } catch (e) {
    throw new CsrError(`certificate signing request cannot be parsed: ${(e as Error).message}`);
  }
  const alg = csr.publicKey.algorithm as webcrypto.EcKeyAlgorithm;
  if (alg.name !== 'ECDSA' || !['P-256', 'P-384'].includes(alg.namedCurve)) throw new CsrError('certificate signing request must carry an ECDSA P-256 or P-384 key');
  let valid = false;
  try {
    valid = await csr.verify();
  } catch {
    valid = false;
  }
  if (!valid) throw new CsrError('certificate signing request signature does not verify');
  const san = csr.extensions.find((e): e is X509Lib.SubjectAlternativeNameExtension => e instanceof x.SubjectAlternativeNameExtension);
  const uris = san ? san.names.items.filter((n) => n.type === 'url').map((n) => n.value) : [];
  const others = san ? san.names.items.filter((n) => n.type !== 'url') : [];
  if (others.length > 0) throw new CsrError('certificate signing request may name only a URI (the SPIFFE ID)');
  return { uris, publicKey: csr.publicKey };
}

/**
 * A PKIX (SubjectPublicKeyInfo, DER) public key as a PodCertificateRequest carries it, whose
 * possession the API server has already checked; only ECDSA P-256 and P-384 are signed.
 */
export async function spkiPublicKey(der: Uint8Array): Promise<Pick<CheckedCsr, 'publicKey'>> {
  const x = await x509();
  let publicKey: X509Lib.PublicKey;
  try {
    publicKey = new x.PublicKey(Buffer.from(der));
  } catch (e) {
    throw new CsrError(`public key cannot be parsed: ${(e as Error).message}`);
  }
  const alg = publicKey.algorithm as webcrypto.EcKeyAlgorithm;
  if (alg.name !== 'ECDSA' || !['P-256', 'P-384'].includes(alg.namedCurve)) throw new CsrError(`${alg.name}${alg.namedCurve ? ` ${alg.namedCurve}` : ''} keys are not signed: use ECDSA P-256 (keyType ECDSAP256)`);
  return { publicKey };
}

/** The signing algorithm and WebCrypto key of a CA key in PEM (EC P-256/P-384 or RSA). */
async function signerOf(keyPem: string): Promise<{ key: webcrypto.CryptoKey; algorithm: { name: string; hash: string; namedCurve?: string } }> {
  const key = createPrivateKey(keyPem);
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    const namedCurve = curve === 'secp384r1' ? 'P-384' : curve === 'prime256v1' ? 'P-256' : undefined;
    if (!namedCurve) throw new Error(`CA key curve ${curve} is not supported (P-256, P-384)`);
    const algorithm = { name: 'ECDSA', namedCurve, hash: namedCurve === 'P-384' ? 'SHA-384' : 'SHA-256' };
    return { key: key.toCryptoKey(algorithm, false, ['sign']) as webcrypto.CryptoKey, algorithm };
  }
  if (key.asymmetricKeyType === 'rsa') {
    const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    return { key: key.toCryptoKey(algorithm, false, ['sign']) as webcrypto.CryptoKey, algorithm };
  }
  throw new Error(`CA key type ${key.asymmetricKeyType} is not supported (EC or RSA)`);
}

/** A positive 128-bit serial number (RFC 5280: at most 20 octets, positive). */
function serialNumber(): string {
  const b = randomBytes(16);
  b[0] &= 0x7f;
  b[0] |= 0x01;
  return b.toString('hex');
}

/** What signing with one CA needs, parsed once per CA (an issuer signs many certificates with the same one). */
interface PreparedCa {
  caCert: X509Lib.X509Certificate;
  signer: Awaited<ReturnType<typeof signerOf>>;
  authorityKeyId: X509Lib.AuthorityKeyIdentifierExtension;
}
const prepared = new WeakMap<SigningCa, Promise<PreparedCa>>();

function preparedCa(ca: SigningCa): Promise<PreparedCa> {
  let p = prepared.get(ca);
  if (!p) {
    p = (async () => {
      const x = await x509();
      const caCert = new x.X509Certificate(ca.certPem);
      // the CA's own key identifier when it has one: libraries compute it differently (Go's, as in
      // helm's genCA, is not @peculiar's), and verifiers match the leaf's AKI against it
      const ski = caCert.extensions.find((e): e is X509Lib.SubjectKeyIdentifierExtension => e instanceof x.SubjectKeyIdentifierExtension);
      const authorityKeyId = ski ? new x.AuthorityKeyIdentifierExtension(ski.keyId) : await x.AuthorityKeyIdentifierExtension.create(caCert);
      return { caCert, signer: await signerOf(ca.keyPem), authorityKeyId };
    })();
    prepared.set(ca, p);
  }
  return p;
}

export interface IssueOptions {
  /** Life of the certificate from `now`. */
  ttlMs: number;
  /** notBefore lies this far before `now`, for peers whose clocks run behind (default 15 min). */
  backdateMs?: number;
  now?: Date;
}

/**
 * Signs a workload certificate for `id` over a checked CSR's key: one URI SAN (critical, as the
 * subject is empty), digital signature, server and client auth, not a CA; never outliving the CA.
 */
export async function issueWorkloadCertificate(ca: SigningCa, csr: Pick<CheckedCsr, 'publicKey'>, id: WorkloadId, opts: IssueOptions): Promise<{ certPem: string; notAfter: Date }> {
  const x = await x509();
  const now = opts.now ?? new Date();
  const { caCert, signer, authorityKeyId } = await preparedCa(ca);
  const notBefore = new Date(now.getTime() - (opts.backdateMs ?? 15 * 60_000));
  let notAfter = new Date(now.getTime() + opts.ttlMs);
  if (notAfter > caCert.notAfter) notAfter = caCert.notAfter;
  const cert = await x.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: '',
    issuer: caCert.subject,
    notBefore: notBefore < caCert.notBefore ? caCert.notBefore : notBefore,
    notAfter,
    publicKey: csr.publicKey,
    signingKey: signer.key,
    signingAlgorithm: signer.algorithm,
    extensions: [
      new x.BasicConstraintsExtension(false, undefined, true),
      new x.KeyUsagesExtension(x.KeyUsageFlags.digitalSignature | x.KeyUsageFlags.keyEncipherment, true),
      new x.ExtendedKeyUsageExtension([x.ExtendedKeyUsage.serverAuth, x.ExtendedKeyUsage.clientAuth]),
      new x.SubjectAlternativeNameExtension([{ type: 'url', value: spiffeUri(id) }], true),
      await x.SubjectKeyIdentifierExtension.create(csr.publicKey),
      authorityKeyId,
    ],
  });
  return { certPem: pemText(cert.toString('pem')), notAfter };
}

/** A self-signed ECDSA P-256 root for workload certificates (standalone use and tests; the chart makes its own). */
export async function createRootCa(opts: { commonName?: string; ttlMs: number; now?: Date }): Promise<SigningCa> {
  const x = await x509();
  const now = opts.now ?? new Date();
  const key = newWorkloadKey();
  const keys = cryptoKeyPair(key.key);
  const cert = await x.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `O=rt, CN=${opts.commonName ?? 'rt identity root'}`,
    notBefore: new Date(now.getTime() - 15 * 60_000),
    notAfter: new Date(now.getTime() + opts.ttlMs),
    keys,
    signingAlgorithm: ECDSA_P256,
    extensions: [
      new x.BasicConstraintsExtension(true, undefined, true),
      new x.KeyUsagesExtension(x.KeyUsageFlags.keyCertSign | x.KeyUsageFlags.cRLSign | x.KeyUsageFlags.digitalSignature, true),
      await x.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: pemText(cert.toString('pem')), keyPem: key.keyPem };
}

/** The certificates of a PEM bundle, one PEM each (a trust bundle may hold two roots during a rotation). */
export function splitPemBundle(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((c) => `${c}\n`) ?? [];
}

/** notAfter of the first certificate of a PEM chain. */
export function certificateNotAfter(certPem: string): Date {
  return new Date(new X509Certificate(certPem).validTo);
}
