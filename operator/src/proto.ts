/** Loads operator/proto/operator.proto (shared by the operator's server and the sidecar's client). */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../shared/proto-libs.ts';

/**
 * Marks the metadata entries whose values came from Secrets, so the sidecar never logs them. Here,
 * beside the wire types, so that the sidecar does not load the operator's checks for it.
 */
export const RESOLVED_SECRETS_ANNOTATION = 'rt.io/resolved-secrets';

export interface WatchResourcesRequest {
  namespace: string;
  appId: string;
  podName: string;
}

export interface WireResource {
  kind: string;
  name: string;
  json: Buffer;
}

/** A Component in scope that is not sent, and why (invalid, or its Secrets unresolvable). */
export interface WireWithheld {
  kind: string;
  name: string;
  type: string;
  reason: string;
}

export interface ResourceSnapshot {
  resources: WireResource[];
  appId: string;
  version: string;
  withheld: WireWithheld[];
}

let pkg: grpc.GrpcObject | undefined;

function load(): grpc.GrpcObject {
  pkg ??= grpc.loadPackageDefinition(
    protoLoader().loadSync(fileURLToPath(new URL('../proto/operator.proto', import.meta.url)), { keepCase: false, longs: String, defaults: true }),
  );
  return pkg;
}

export function operatorService(): grpc.ServiceDefinition {
  const v1 = ((load().rt as grpc.GrpcObject).operator as grpc.GrpcObject).v1 as grpc.GrpcObject;
  return (v1.Operator as grpc.ServiceClientConstructor).service;
}

export function operatorClient(address: string, creds: grpc.ChannelCredentials): grpc.Client & {
  WatchResources(req: WatchResourcesRequest, md: grpc.Metadata): grpc.ClientReadableStream<ResourceSnapshot>;
} {
  const v1 = ((load().rt as grpc.GrpcObject).operator as grpc.GrpcObject).v1 as grpc.GrpcObject;
  const Ctor = v1.Operator as grpc.ServiceClientConstructor;
  return new Ctor(address, creds) as never;
}
