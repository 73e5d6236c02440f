/**
 * The issuer's decision, shared by every issuer (the operator on a cluster, the local CA of
 * `rt run`): given who the caller was verified to be, check what it asks for and sign. The
 * request's own id, namespace and trust domain are only compared with the verified identity,
 * never used in its place.
 */
import { checkCsr, CsrError, issueWorkloadCertificate, splitPemBundle, type SigningCa } from './x509.ts';
import { parseSpiffeUri, sameWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';

export interface IssuerSettings {
  trustDomain: string;
  /** The signing CA and the trust bundle sidecars check peers against (PEM, one or more roots). */
  ca: SigningCa;
  trustBundlePem: string;
  ttlMs: number;
  backdateMs?: number;
}

export interface CertificateAsk {
  /** The app id the caller believes it is. */
  id: string;
  namespace: string;
  trustDomain: string;
  csrPem: string | Uint8Array;
}

export interface Issued {
  id: WorkloadId;
  certPem: string;
  trustChainPems: string[];
  notAfter: Date;
}

/** Checks the ask against the verified caller and signs; CsrError (a clear, returnable reason) when refused. */
export async function issueFor(settings: IssuerSettings, verified: { namespace: string; appId: string }, ask: CertificateAsk, now = new Date()): Promise<Issued> {
  const id: WorkloadId = { trustDomain: settings.trustDomain, namespace: verified.namespace, appId: verified.appId };
  if (ask.id && ask.id !== verified.appId) throw new CsrError(`the request names app id ${JSON.stringify(ask.id)}, but the caller is ${JSON.stringify(verified.appId)}`);
  if (ask.namespace && ask.namespace !== verified.namespace) throw new CsrError(`the request names namespace ${JSON.stringify(ask.namespace)}, but the caller is in ${JSON.stringify(verified.namespace)}`);
  if (ask.trustDomain && ask.trustDomain !== settings.trustDomain) throw new CsrError(`the request names trust domain ${JSON.stringify(ask.trustDomain)}; this issuer signs for ${JSON.stringify(settings.trustDomain)}`);
  const csr = await checkCsr(ask.csrPem);
  const asked = csr.uris.map((u) => ({ u, id: parseSpiffeUri(u) }));
  const wrong = asked.find((a) => !a.id || !sameWorkload(a.id, id));
  if (wrong) throw new CsrError(`the CSR asks for ${wrong.u}, but the caller is ${spiffeUri(id)}`);
  const { certPem, notAfter } = await issueWorkloadCertificate(settings.ca, csr, id, { ttlMs: settings.ttlMs, backdateMs: settings.backdateMs, now });
  return { id, certPem, trustChainPems: splitPemBundle(settings.trustBundlePem), notAfter };
}
