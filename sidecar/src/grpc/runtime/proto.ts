/**
 * Loads rt's runtime API protos (proto/, package dapr.proto.runtime.v1) once per process.
 * google/protobuf well-known types come from protobufjs's bundled definitions, as in
 * workflows/proto.ts. Options: snake_case field names as in the .proto, 64-bit numbers as JS
 * numbers, enums as numbers, unset fields as their defaults (null for messages; proto3
 * `optional` fields stay undefined), and `json: false` so that a google.protobuf.Any (job
 * data) arrives as {type_url, value} bytes, as sent: with `json: true` protobufjs would unpack
 * the types it knows and a job could not hand its bytes back unchanged (any.ts). Loaded with
 * the light loader (../service-definition.ts): the sidecar serves this service from its first
 * second.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadServiceDefinition, type LightLoadOptions } from '../service-definition.ts';

export const PROTO_DIR = join(import.meta.dirname, 'proto');
export const RUNTIME_PACKAGE = 'dapr.proto.runtime.v1';
export const SERVICE_NAME = `${RUNTIME_PACKAGE}.Dapr`;

const LOADER_OPTIONS: LightLoadOptions = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: true,
  oneofs: true,
  json: false,
  includeDirs: [PROTO_DIR],
};

let service: grpc.ServiceDefinition | undefined;

/** Service definition of dapr.proto.runtime.v1.Dapr (for the server). */
export function runtimeService(): grpc.ServiceDefinition {
  service ??= loadServiceDefinition('dapr/proto/runtime/v1/dapr.proto', SERVICE_NAME, LOADER_OPTIONS);
  return service;
}

/** A generic client of the same service (tests, benchmarks, tooling). */
export function runtimeClient(): grpc.ServiceClientConstructor {
  return grpc.makeGenericClientConstructor(runtimeService(), 'Dapr');
}
