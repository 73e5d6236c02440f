/** Loads identity/proto/sentry.proto: the issuer's service (operator, `rt run --mtls`) and the sidecar's client. */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../../shared/proto-libs.ts';

export interface SignCertificateRequest {
  id: string;
  token: string;
  trustDomain: string;
  namespace: string;
  certificateSigningRequest: Buffer;
  tokenValidator?: string | number;
}

export interface SignCertificateResponse {
  workloadCertificate: Buffer;
  trustChainCertificates: Buffer[];
  validUntil: { seconds: string | number; nanos: number } | null;
  jwt?: string;
}

let pkg: grpc.GrpcObject | undefined;

function caConstructor(): grpc.ServiceClientConstructor {
  pkg ??= grpc.loadPackageDefinition(
    protoLoader().loadSync(fileURLToPath(new URL('./proto/sentry.proto', import.meta.url)), { keepCase: false, longs: String, enums: String, defaults: true }),
  );
  const v1 = (((pkg.dapr as grpc.GrpcObject).proto as grpc.GrpcObject).sentry as grpc.GrpcObject).v1 as grpc.GrpcObject;
  return v1.CA as grpc.ServiceClientConstructor;
}

export function caService(): grpc.ServiceDefinition {
  return caConstructor().service;
}

export type CaClient = grpc.Client & {
  SignCertificate(req: SignCertificateRequest, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: SignCertificateResponse) => void): grpc.ClientUnaryCall;
};

export function caClient(address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions): CaClient {
  const Ctor = caConstructor();
  return new Ctor(address, creds, options) as unknown as CaClient;
}
