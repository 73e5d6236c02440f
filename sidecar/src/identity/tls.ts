/**
 * The workload identity on the wire: the secure contexts of the internal port and of the
 * sidecar's clients, the check that a peer is the workload it should be (its SPIFFE ID, never a
 * DNS name), and grpc-js credentials that follow certificate rotation (a CertificateProvider: each
 * new connection takes the certificate in force; established ones go on).
 */
import { connect as tlsConnect, createSecureContext, type PeerCertificate, type SecureContext, type TLSSocket } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { IdentityManager, Svid } from './manager.ts';
import { certificateWorkload, sameWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';

type CaListener = Parameters<grpc.experimental.CertificateProvider['addCaCertificateListener']>[0];
type IdentityListener = Parameters<grpc.experimental.CertificateProvider['addIdentityCertificateListener']>[0];

/** checkServerIdentity for node:tls and grpc-js: the peer must be `expected` (the host name is not looked at). */
export function expectPeer(expected: WorkloadId): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => {
    const got = certificateWorkload(cert);
    if (!got) return new Error(`the peer's certificate names no SPIFFE ID (expected ${spiffeUri(expected)})`);
    if (!sameWorkload(got, expected)) return new Error(`the peer is ${spiffeUri(got)}, not ${spiffeUri(expected)}`);
    return undefined;
  };
}

/** checkServerIdentity accepting any workload of a trust domain (a control-plane service checked against the trust bundle). */
export function expectTrustDomain(trustDomain: string): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => {
    const got = certificateWorkload(cert);
    if (!got) return new Error(`the peer's certificate names no SPIFFE ID of trust domain ${trustDomain}`);
    if (got.trustDomain !== trustDomain) return new Error(`the peer is ${spiffeUri(got)}, outside trust domain ${trustDomain}`);
    return undefined;
  };
}

/** What a TLS server of this identity takes (`tls.createServer`, `setSecureContext`): it asks every client for a certificate from the bundle. */
export function serverTlsOptions(s: Svid): { key: string; cert: string; ca: string } {
  return { key: s.keyPem, cert: s.certPem, ca: s.bundlePem };
}

const clientContexts = new WeakMap<Svid, SecureContext>();

/** The client secure context of an identity, made once per certificate. */
export function clientContext(s: Svid): SecureContext {
  let c = clientContexts.get(s);
  if (!c) {
    c = createSecureContext({ key: s.keyPem, cert: s.certPem, ca: s.bundlePem });
    clientContexts.set(s, c);
  }
  return c;
}

/**
 * A TLS connection presenting the current certificate to a peer that must be `expected`: to
 * host:port, or to a Unix socket (`path`). `alpn` is offered (the internal port tells HTTP/1.1
 * from gRPC by it).
 */
export function connectAs(manager: IdentityManager, expected: WorkloadId, to: { host?: string; port?: number; path?: string }, alpn: string, cb: (err: Error | null, socket: TLSSocket | null) => void): void {
  const s = manager.current;
  if (!s) {
    cb(new Error(`no workload certificate yet: ${manager.problem() ?? 'waiting for the issuer'}`), null);
    return;
  }
  const socket = tlsConnect({ ...to, secureContext: clientContext(s), ALPNProtocols: [alpn], checkServerIdentity: expectPeer(expected) });
  socket.setNoDelay(true);
  const onError = (e: Error) => cb(e, null);
  socket.once('error', onError);
  socket.once('secureConnect', () => {
    socket.off('error', onError);
    cb(null, socket);
  });
}

/** The manager as a grpc-js CertificateProvider: identity (key and chain) and the trust bundle (plus `caPem` when given). */
class ManagerProvider implements grpc.experimental.CertificateProvider {
  private readonly manager: IdentityManager;
  private readonly caPem?: Buffer;
  private readonly ca = new Set<CaListener>();
  private readonly identity = new Set<IdentityListener>();
  private readonly stop: () => void;

  constructor(manager: IdentityManager, caPem?: Buffer) {
    this.manager = manager;
    this.caPem = caPem;
    this.stop = manager.onRotate((s) => {
      for (const l of this.ca) l(this.caUpdate(s));
      for (const l of this.identity) l(this.identityUpdate(s));
    });
  }

  private caUpdate(s: Svid | undefined): { caCertificate: Buffer } | null {
    const pem = s?.bundlePem ?? this.manager.bundlePem;
    // the CA file is as it was at admission; the bundle is renewed with each certificate, so a
    // service re-signed by a new root during a root rotation stays verifiable without a restart
    if (this.caPem) return { caCertificate: pem ? Buffer.concat([this.caPem, Buffer.from('\n'), Buffer.from(pem)]) : this.caPem };
    return pem ? { caCertificate: Buffer.from(pem) } : null;
  }

  private identityUpdate(s: Svid): { certificate: Buffer; privateKey: Buffer } {
    return { certificate: Buffer.from(s.certPem), privateKey: Buffer.from(s.keyPem) };
  }

  addCaCertificateListener(l: CaListener): void {
    this.ca.add(l);
    const u = this.caUpdate(this.manager.current);
    if (u) l(u);
  }

  removeCaCertificateListener(l: CaListener): void {
    this.ca.delete(l);
  }

  addIdentityCertificateListener(l: IdentityListener): void {
    this.identity.add(l);
    const s = this.manager.current;
    if (s) l(this.identityUpdate(s));
  }

  removeIdentityCertificateListener(l: IdentityListener): void {
    this.identity.delete(l);
  }

  close(): void {
    this.stop();
  }
}

export interface ClientCredentialOptions {
  /**
   * Also trust this PEM CA, beside the trust bundle (a control-plane service with a serving
   * certificate of the chart's CA, checked by its host name). The bundle part follows rotation.
   */
  caPem?: Buffer;
  /** The peer's check; default: node's host-name check when `caPem` is given, else any workload of this identity's trust domain. */
  checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined;
}

/**
 * grpc-js credentials presenting this sidecar's certificate, rotation included: a connection made
 * after a renewal presents the new certificate. Connections wait for the first certificate.
 */
export function grpcClientCredentials(manager: IdentityManager, o: ClientCredentialOptions = {}): grpc.ChannelCredentials {
  const provider = new ManagerProvider(manager, o.caPem);
  const checkServerIdentity = o.checkServerIdentity ?? (o.caPem ? undefined : expectTrustDomain(manager.id.trustDomain));
  return grpc.experimental.createCertificateProviderChannelCredentials(provider, provider, checkServerIdentity ? { checkServerIdentity } : {});
}
