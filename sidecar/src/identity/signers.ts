/**
 * Where a sidecar's certificates come from: the issuer's `dapr.proto.sentry.v1.CA/SignCertificate`
 * over TLS (on a cluster, the operator; the pod's projected token proves who asks), or in-process
 * from a local CA (`rt run --enable-mtls`: whoever can read the CA's key file may sign, so local
 * file access is the trust).
 */
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { issueFor, type IssuerSettings } from './issue.ts';
import type { SignedCertificate, Signer } from './manager.ts';
import { caClient, type CaClient, type SignCertificateResponse } from './proto.ts';
import type { WorkloadId } from '../../../shared/spiffe.ts';
import { certificateNotAfter } from './x509.ts';

const SIGN_TIMEOUT_MS = 10_000;

export interface GrpcSignerOptions {
  /** host:port of the issuer. */
  address: string;
  /** PEM CA of the issuer's serving certificate (RT_OPERATOR_CA_FILE); none = plaintext (tests, local). */
  caPem?: Buffer;
  /** Read before every request: projected tokens are rotated by the kubelet. */
  tokenFile?: string;
}

export class GrpcSigner implements Signer {
  readonly description: string;
  private readonly o: GrpcSignerOptions;
  private client: CaClient | undefined;

  constructor(o: GrpcSignerOptions) {
    this.o = o;
    this.description = `identity issuer at ${o.address}`;
  }

  async sign(csrPem: string, id: WorkloadId): Promise<SignedCertificate> {
    let token = '';
    if (this.o.tokenFile) {
      try {
        token = readFileSync(this.o.tokenFile, 'utf8').trim();
      } catch (e) {
        throw new Error(`cannot read the service-account token ${this.o.tokenFile}: ${(e as Error).message}`, { cause: e });
      }
    }
    // an issuer back after an outage is found within a few seconds (grpc-js's own reconnect backoff reaches 2 min)
    this.client ??= caClient(this.o.address, this.o.caPem ? grpc.credentials.createSsl(this.o.caPem) : grpc.credentials.createInsecure(), { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 5_000 });
    const md = new grpc.Metadata();
    if (token) md.set('authorization', `Bearer ${token}`);
    const req = { id: id.appId, token, trustDomain: id.trustDomain, namespace: id.namespace, certificateSigningRequest: Buffer.from(csrPem), tokenValidator: token ? 'KUBERNETES' : 'UNKNOWN' };
    const res = await new Promise<SignCertificateResponse>((resolve, reject) => {
      this.client!.SignCertificate(req, md, { deadline: Date.now() + SIGN_TIMEOUT_MS }, (err, r) => {
        if (err) reject(new Error(err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED ? `unreachable: ${err.details}` : `refused (${grpc.status[err.code]}): ${err.details}`));
        else if (!r) reject(new Error('empty answer'));
        else resolve(r);
      });
    });
    const certPem = Buffer.from(res.workloadCertificate).toString('utf8');
    if (!certPem.includes('-----BEGIN CERTIFICATE-----')) throw new Error('the answer carries no PEM workload certificate');
    return {
      certPem,
      trustChainPems: res.trustChainCertificates.map((c) => Buffer.from(c).toString('utf8')),
      // the certificate's own notAfter, not valid_until: the two agree, and the certificate is what peers check
      notAfter: certificateNotAfter(certPem),
    };
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}

/** Signs in this process with a CA it holds (the local CA of `rt run --enable-mtls`, tests). */
export class LocalSigner implements Signer {
  readonly description: string;
  private readonly settings: IssuerSettings;

  constructor(settings: IssuerSettings, description = 'local CA') {
    this.settings = settings;
    this.description = description;
  }

  async sign(csrPem: string, id: WorkloadId): Promise<SignedCertificate> {
    const issued = await issueFor(this.settings, { namespace: id.namespace, appId: id.appId }, { id: id.appId, namespace: id.namespace, trustDomain: id.trustDomain, csrPem });
    return { certPem: issued.certPem, trustChainPems: issued.trustChainPems, notAfter: issued.notAfter };
  }
}
