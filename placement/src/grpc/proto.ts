/** Loads placement.proto, and the messages' shapes as proto-loader gives them (camelCase). */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../../shared/proto-libs.ts';

let cached: grpc.ServiceClientConstructor | undefined;

/** The generated-at-runtime client constructor; `.service` is the server definition. */
export function placementService(): grpc.ServiceClientConstructor {
  if (cached) return cached;
  const file = fileURLToPath(new URL('../../proto/placement.proto', import.meta.url));
  const def = protoLoader().loadSync(file, { keepCase: false, longs: Number, enums: String, defaults: false, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { rt: { placement: { v1: { Placement: grpc.ServiceClientConstructor } } } };
  cached = pkg.rt.placement.v1.Placement;
  return cached;
}

export interface PbHost {
  name?: string;
  port?: number;
  entities?: string[];
  id?: string;
  pod?: string;
  namespace?: string;
  ackOperation?: string;
  ackVersion?: string;
}

export interface PbTableHost {
  name?: string;
  id?: string;
  pod?: string;
}

export interface PbOrder {
  operation?: string;
  tables?: {
    entries?: Record<string, { hosts?: PbTableHost[] }>;
    version?: string;
    replicationFactor?: number;
  };
}
