/**
 * The kubelet's credential bundle: on a cluster that serves PodCertificateRequests the injector
 * projects a `podCertificate` volume (signer rt.io/workload), and the kubelet writes one file
 * holding the pod's private key (the first PEM block, PKCS#8) and its certificate chain (leaf
 * first). The kubelet made the key, got it signed and rotates it; the sidecar only reads the
 * file, again whenever it may have changed. One file, so key and chain are always a pair.
 */
import { createPrivateKey, createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { SignedCertificate, Signer } from './manager.ts';
import { certificateWorkload, sameWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';

export interface CredentialBundle {
  id: WorkloadId;
  keyPem: string;
  /** Leaf first, then any intermediates: what the sidecar presents. */
  certPem: string;
  /** Self-signed certificates of the chain: the roots the signer trusts (rt.io/workload puts its trust bundle there). */
  rootsPem: string[];
  notBefore: number;
  notAfter: number;
}

/** A bundle that cannot be used; the message says why (never the key). */
export class CredentialBundleError extends Error {}

const BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----/g;

export function parseCredentialBundle(text: string): CredentialBundle {
  const blocks = [...text.matchAll(BLOCK)].map((m) => ({ type: m[1], pem: `${m[0]}\n` }));
  if (blocks.length === 0) throw new CredentialBundleError('the credential bundle holds no PEM blocks (the kubelet has not written it yet?)');
  const [first, ...rest] = blocks;
  if (first.type !== 'PRIVATE KEY') throw new CredentialBundleError(`the credential bundle must begin with a PRIVATE KEY block, not ${first.type}`);
  if (rest.length === 0 || rest.some((b) => b.type !== 'CERTIFICATE')) throw new CredentialBundleError('the credential bundle must hold the certificate chain after its key');
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(rest[0].pem);
  } catch (e) {
    throw new CredentialBundleError(`the bundle's certificate cannot be read: ${(e as Error).message}`);
  }
  let key;
  try {
    key = createPrivateKey(first.pem);
  } catch {
    throw new CredentialBundleError("the bundle's private key cannot be read");
  }
  const spki = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });
  if (!spki(createPublicKey(key)).equals(spki(leaf.publicKey))) throw new CredentialBundleError("the bundle's certificate is not for its key");
  const id = certificateWorkload(leaf);
  if (!id) throw new CredentialBundleError(`the bundle's certificate names no workload (subjectAltName ${leaf.subjectAltName ?? 'none'})`);
  const selfSigned = (pem: string) => {
    try {
      const c = new X509Certificate(pem);
      return c.subject === c.issuer && c.verify(c.publicKey);
    } catch {
      return false;
    }
  };
  const chain = rest.slice(1).filter((b) => !selfSigned(b.pem));
  const roots = rest.slice(1).filter((b) => selfSigned(b.pem));
  return { id, keyPem: first.pem, certPem: [rest[0], ...chain].map((b) => b.pem).join(''), rootsPem: roots.map((b) => b.pem), notBefore: Date.parse(leaf.validFrom), notAfter: Date.parse(leaf.validTo) };
}

export function readCredentialBundle(path: string): CredentialBundle {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new CredentialBundleError(`the credential bundle ${path} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return parseCredentialBundle(text);
}

/**
 * The kubelet as a certificate source for the identity manager: it holds the key, so there is no
 * CSR; each load reads the bundle again (the kubelet rotates it). The roots to trust are the
 * self-signed certificates the signer put behind the chain, else the pod's trust anchors file.
 */
export class CredentialBundleSource implements Signer {
  readonly description: string;
  private readonly path: string;
  private readonly anchorsFile: string | undefined;

  constructor(path: string, anchorsFile?: string) {
    this.path = path;
    this.anchorsFile = anchorsFile;
    this.description = `kubelet's pod certificate ${path}`;
  }

  sign(): Promise<SignedCertificate> {
    return Promise.reject(new Error('the kubelet signs this pod\'s certificate; there is nothing to send a CSR to'));
  }

  async load(id: WorkloadId): Promise<SignedCertificate & { keyPem: string }> {
    const b = readCredentialBundle(this.path);
    if (!sameWorkload(b.id, id)) throw new CredentialBundleError(`the pod certificate names ${spiffeUri(b.id)}, not ${spiffeUri(id)}`);
    // the roots the signer sent with the chain (they follow a root rotation), else the pod's anchors
    const anchors = b.rootsPem.length ? b.rootsPem : this.anchorsFile ? [readFileSync(this.anchorsFile, 'utf8')] : [];
    return { keyPem: b.keyPem, certPem: b.certPem, notAfter: new Date(b.notAfter), trustChainPems: anchors };
  }
}
