/**
 * The workload-certificate issuer: `dapr.proto.sentry.v1.CA/SignCertificate` on the operator's
 * gRPC port. The caller proves who it is with its projected service-account token (the same one
 * it sends to WatchResources: TokenReview, the pod it is bound to, that pod still current, its
 * `rt.io/app-id`); `issueFor` then checks what it asks for against that and signs. The signing
 * CA and the trust bundle are files (a mounted Secret) read again when they change, so a root
 * rotation needs no restart. Neither the token nor the CSR is ever logged.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { checkCsr, CsrError, issueFor, type IssuerSettings, type SignCertificateRequest, type SignCertificateResponse, splitPemBundle } from '../../sidecar/src/index.ts';
import { spiffeUri, workloadIdProblem } from '../../shared/spiffe.ts';
import { parseDuration } from '../../shared/duration.ts';
import { IdentityError, type IdentityChecker } from './identity.ts';

export const DEFAULT_TRUST_DOMAIN = 'cluster.local';
export const DEFAULT_WORKLOAD_CERT_TTL_MS = 24 * 3_600_000;

export interface IssuerOptions {
  trustDomain: string;
  /** The signing CA's certificate and key (PEM; EC or RSA key, as helm's genCA makes). */
  caCertFile: string;
  caKeyFile: string;
  /** The roots sidecars trust (PEM, one or two during a root rotation); default: the CA certificate. */
  trustBundleFile?: string;
  ttlMs: number;
}

/** A refusal as the gRPC status the caller gets. */
class Refusal extends Error {
  readonly code: grpc.status;
  constructor(code: grpc.status, message: string) {
    super(message);
    this.code = code;
  }
}

/** How often at most the CA files are compared with what is loaded. */
const RELOAD_CHECK_MS = 1000;

export class CertificateIssuer {
  private readonly opts: IssuerOptions;
  private readonly identity: IdentityChecker;
  private readonly log: Logger;
  private loaded: { raw: string; settings: IssuerSettings };
  private checkedAt = 0;
  /** Certificates signed since start. */
  issued = 0;
  /** Requests refused since start, by gRPC status name (UNAUTHENTICATED, PERMISSION_DENIED, …). */
  readonly refused = new Map<string, number>();

  /** Loads the CA now: a missing or mismatched file stops the operator's start with the reason. */
  constructor(opts: IssuerOptions, identity: IdentityChecker, log: Logger) {
    this.opts = opts;
    this.identity = identity;
    this.log = log.child({ scope: 'issuer' });
    this.loaded = this.load();
    const bundle = this.loaded.settings.trustBundlePem;
    this.log.info({ trustDomain: opts.trustDomain, roots: splitPemBundle(bundle).length, ttlMs: opts.ttlMs }, 'workload certificate issuer on');
  }

  /** The trust bundle as loaded now (PEM). */
  get trustBundlePem(): string {
    return this.current().trustBundlePem;
  }

  private read(): { raw: string; cert: string; key: string; bundle: string } {
    const cert = readFileSync(this.opts.caCertFile, 'utf8');
    const key = readFileSync(this.opts.caKeyFile, 'utf8');
    const bundle = this.opts.trustBundleFile ? readFileSync(this.opts.trustBundleFile, 'utf8') : cert;
    return { raw: `${cert}\0${key}\0${bundle}`, cert, key, bundle };
  }

  private load(): { raw: string; settings: IssuerSettings } {
    const { raw, cert, key, bundle } = this.read();
    const caCert = new X509Certificate(cert);
    if (!caCert.ca) throw new Error(`${this.opts.caCertFile} is not a CA certificate (basicConstraints CA:FALSE)`);
    if (!caCert.checkPrivateKey(createPrivateKey(key))) throw new Error(`${this.opts.caCertFile} and ${this.opts.caKeyFile} do not belong together (the key is not the certificate's)`);
    const roots = splitPemBundle(bundle);
    if (roots.length === 0) throw new Error(`${this.opts.trustBundleFile} holds no PEM certificate`);
    if (!roots.some((r) => new X509Certificate(r).fingerprint256 === caCert.fingerprint256 || caCert.checkIssued(new X509Certificate(r)))) {
      this.log.warn('the signing CA is not in the trust bundle, nor issued by one of its roots: sidecars will not trust the certificates it signs');
    }
    return { raw, settings: { trustDomain: this.opts.trustDomain, ca: { certPem: cert, keyPem: key }, trustBundlePem: bundle, ttlMs: this.opts.ttlMs } };
  }

  /** The CA and settings in force (PodCertificateRequests are signed with the same). */
  get settings(): IssuerSettings {
    return this.current();
  }

  /** The settings, read again when the files changed (a Secret's files swap through a symlink). */
  private current(): IssuerSettings {
    const now = Date.now();
    if (now - this.checkedAt < RELOAD_CHECK_MS) return this.loaded.settings;
    this.checkedAt = now;
    try {
      if (this.read().raw === this.loaded.raw) return this.loaded.settings;
      this.loaded = this.load();
      this.log.info({ roots: splitPemBundle(this.loaded.settings.trustBundlePem).length }, 'identity CA or trust bundle changed: signing with the new files');
    } catch (e) {
      this.log.warn(`identity CA files cannot be loaded, signing with the previous ones: ${(e as Error).message}`);
    }
    return this.loaded.settings;
  }

  /** Verifies the caller, checks its request and signs; a refusal is thrown as a Refusal. */
  async sign(req: SignCertificateRequest, metadata: grpc.Metadata): Promise<SignCertificateResponse> {
    const bearer = /^Bearer\s+(\S+)$/i.exec(String(metadata.get('authorization')[0] ?? '').trim())?.[1];
    const token = req.token || bearer || '';
    if (!token) throw new Refusal(grpc.status.UNAUTHENTICATED, 'no service-account token: send the projected token (audience rt.io/operator) in the token field');
    let caller;
    try {
      caller = await this.identity.identify(token);
    } catch (e) {
      if (e instanceof IdentityError) throw new Refusal(grpc.status.UNAUTHENTICATED, e.message);
      throw new Refusal(grpc.status.UNAVAILABLE, `cannot check the token: ${(e as Error).message}`);
    }
    const ask = { id: req.id, namespace: req.namespace, trustDomain: req.trustDomain, csrPem: req.certificateSigningRequest };
    // a CSR that does not parse is the caller's mistake; once it parses, every refusal of
    // issueFor's is a request for an identity other than the verified one
    try {
      await checkCsr(ask.csrPem);
    } catch (e) {
      if (e instanceof CsrError) throw new Refusal(grpc.status.INVALID_ARGUMENT, e.message);
      throw e;
    }
    let issued;
    try {
      issued = await issueFor(this.current(), { namespace: caller.namespace, appId: caller.appId }, ask);
    } catch (e) {
      if (e instanceof CsrError) throw new Refusal(grpc.status.PERMISSION_DENIED, `pod ${caller.namespace}/${caller.podName}: ${e.message}`);
      throw e;
    }
    this.log.info({ pod: `${caller.namespace}/${caller.podName}`, id: spiffeUri(issued.id), notAfter: issued.notAfter.toISOString() }, 'workload certificate issued');
    const ms = issued.notAfter.getTime();
    return {
      workloadCertificate: Buffer.from(issued.certPem),
      trustChainCertificates: issued.trustChainPems.map((p) => Buffer.from(p)),
      validUntil: { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 },
    };
  }

  /** The CA service's implementation, for `server.addService(caService(), …)`. */
  implementation(): grpc.UntypedServiceImplementation {
    return {
      SignCertificate: (call: grpc.ServerUnaryCall<SignCertificateRequest, SignCertificateResponse>, cb: grpc.sendUnaryData<SignCertificateResponse>) => {
        this.sign(call.request, call.metadata).then(
          (res) => {
            this.issued++;
            cb(null, res);
          },
          (e: Error) => {
            const code = e instanceof Refusal ? e.code : grpc.status.INTERNAL;
            const name = grpc.status[code];
            this.refused.set(name, (this.refused.get(name) ?? 0) + 1);
            this.log.warn({ code: name, peer: call.getPeer() }, `certificate refused: ${e.message}`);
            cb({ code, details: e instanceof Refusal ? e.message : `signing failed: ${e.message}` });
          },
        );
      },
    };
  }
}

export interface IdentityFlags {
  'trust-domain'?: string;
  'identity-ca-cert-file'?: string;
  'identity-ca-key-file'?: string;
  'identity-trust-bundle-file'?: string;
  'workload-cert-ttl'?: string;
}

export interface IdentitySettings {
  trustDomain: string;
  /** Present when the CA files are given. */
  issuer?: IssuerOptions;
  /** The roots client certificates are checked against: the trust bundle, else the CA certificate. */
  clientTrustBundleFile?: string;
}

const MIN_TTL_MS = 60_000;
const MAX_TTL_MS = 365 * 24 * 3_600_000;

/** The operator's identity flags, each with its env form; throws an Error naming the flag. */
export function parseIdentityFlags(v: IdentityFlags, env: NodeJS.ProcessEnv): IdentitySettings {
  const trustDomain = v['trust-domain'] ?? (env.RT_TRUST_DOMAIN || DEFAULT_TRUST_DOMAIN);
  const problem = workloadIdProblem({ trustDomain, namespace: 'default', appId: 'app' });
  if (problem) throw new Error(`--trust-domain: ${problem}`);
  const caCertFile = v['identity-ca-cert-file'] ?? (env.RT_IDENTITY_CA_CERT_FILE || undefined);
  const caKeyFile = v['identity-ca-key-file'] ?? (env.RT_IDENTITY_CA_KEY_FILE || undefined);
  const trustBundleFile = v['identity-trust-bundle-file'] ?? (env.RT_IDENTITY_TRUST_BUNDLE_FILE || undefined);
  if (!caCertFile !== !caKeyFile) throw new Error('--identity-ca-cert-file and --identity-ca-key-file go together');
  const ttlText = v['workload-cert-ttl'] ?? (env.RT_WORKLOAD_CERT_TTL || undefined);
  let ttlMs = DEFAULT_WORKLOAD_CERT_TTL_MS;
  if (ttlText !== undefined) {
    const ms = parseDuration(ttlText);
    if (ms === undefined || ms < MIN_TTL_MS || ms > MAX_TTL_MS) throw new Error(`--workload-cert-ttl must be a duration from 1m to 8760h (e.g. 24h, 2m), got "${ttlText}"`);
    ttlMs = ms;
  }
  return {
    trustDomain,
    issuer: caCertFile && caKeyFile ? { trustDomain, caCertFile, caKeyFile, trustBundleFile, ttlMs } : undefined,
    clientTrustBundleFile: trustBundleFile ?? caCertFile,
  };
}
