/**
 * A test issuer: a real gRPC server of `dapr.proto.sentry.v1.CA/SignCertificate` that signs with
 * issueFor and a root made for the test. It stands where the operator's issuer stands on a
 * cluster; instead of a TokenReview it takes the caller to be who its token says (`tokens`), or,
 * without a token table, who its request says. It can be stopped and started again on its port
 * (the issuer down at start or at renewal), and its clock can be the test's.
 */
import * as grpc from '@grpc/grpc-js';
import { issueFor, type IssuerSettings } from '../../sidecar/src/identity/issue.ts';
import { caService, type SignCertificateRequest } from '../../sidecar/src/identity/proto.ts';
import { createRootCa, CsrError, type SigningCa } from '../../sidecar/src/identity/x509.ts';

export interface TestIssuerOptions {
  ttlMs: number;
  trustDomain?: string;
  /** token → the workload it proves (namespace, app id); without: the request's own id and namespace. */
  tokens?: Record<string, { namespace: string; appId: string }>;
  /** The issuer's time (a ManualClock's in unit tests). */
  now?: () => number;
  ca?: SigningCa;
}

export interface TestIssuer {
  address: string;
  port: number;
  ca: SigningCa;
  settings: IssuerSettings;
  /** Certificates signed so far. */
  signed: number;
  stop(): Promise<void>;
  /** Serves again on the same port. */
  start(): Promise<void>;
}

export async function startTestIssuer(o: TestIssuerOptions, port = 0): Promise<TestIssuer> {
  const ca = o.ca ?? (await createRootCa({ ttlMs: 7 * 24 * 3_600_000, commonName: 'rt test identity root' }));
  const settings: IssuerSettings = { trustDomain: o.trustDomain ?? 'cluster.local', ca, trustBundlePem: ca.certPem, ttlMs: o.ttlMs };
  let server: grpc.Server | undefined;
  const issuer: TestIssuer = {
    address: '',
    port,
    ca,
    settings,
    signed: 0,
    async stop() {
      const s = server;
      server = undefined;
      if (s) await new Promise<void>((r) => s.tryShutdown(() => r()));
      s?.forceShutdown();
    },
    async start() {
      const s = new grpc.Server();
      s.addService(caService(), {
        SignCertificate: (call: grpc.ServerUnaryCall<SignCertificateRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          const req = call.request;
          const verified = o.tokens ? o.tokens[req.token] : { namespace: req.namespace, appId: req.id };
          if (!verified) return cb({ code: grpc.status.UNAUTHENTICATED, details: 'unknown token' });
          const now = new Date(o.now ? o.now() : Date.now());
          issueFor(settings, verified, { id: req.id, namespace: req.namespace, trustDomain: req.trustDomain, csrPem: req.certificateSigningRequest }, now).then(
            (issued) => {
              issuer.signed++;
              cb(null, { workloadCertificate: Buffer.from(issued.certPem), trustChainCertificates: issued.trustChainPems.map((p) => Buffer.from(p)), validUntil: { seconds: Math.floor(issued.notAfter.getTime() / 1000), nanos: 0 } });
            },
            (e: Error) => cb({ code: e instanceof CsrError ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL, details: e.message }),
          );
        },
      });
      issuer.port = await new Promise<number>((resolve, reject) => s.bindAsync(`127.0.0.1:${issuer.port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
      issuer.address = `127.0.0.1:${issuer.port}`;
      server = s;
    },
  };
  await issuer.start();
  return issuer;
}
