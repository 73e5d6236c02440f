/**
 * The .proto files of pluggable components (written for rt from the public
 * dapr.proto.components.v1 definitions) loaded once per process with @grpc/proto-loader.
 * Both the sidecar's clients and the example component use these.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { protoLoader as loadProtoLoader } from '../../../shared/proto-libs.ts';

export const PROTO_DIR = join(import.meta.dirname, 'proto');

/** Package of every pluggable component service. */
export const COMPONENTS_PACKAGE = 'dapr.proto.components.v1';

export const COMPONENT_PROTO_FILES = [
  'dapr/proto/components/v1/common.proto',
  'dapr/proto/components/v1/state.proto',
  'dapr/proto/components/v1/bindings.proto',
  'dapr/proto/components/v1/pubsub.proto',
  'dapr/proto/components/v1/secretstore.proto',
];

/**
 * camelCase field names, enums as their names, 64-bit numbers as strings and unset
 * message fields as null, so adapters can tell "no etag" from "empty etag".
 */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

let components: protoLoader.PackageDefinition | undefined;
let reflection: protoLoader.PackageDefinition | undefined;

/** Package definition of the component services (for servers and @grpc/reflection). */
export function componentsDefinition(): protoLoader.PackageDefinition {
  components ??= loadProtoLoader().loadSync(COMPONENT_PROTO_FILES, LOADER_OPTIONS);
  return components;
}

export function reflectionDefinition(): protoLoader.PackageDefinition {
  reflection ??= loadProtoLoader().loadSync(['grpc/reflection/v1/reflection.proto', 'grpc/reflection/v1alpha/reflection.proto'], LOADER_OPTIONS);
  return reflection;
}

/** Client constructor and service definition of one component service, e.g. `StateStore`. */
export function componentService(name: string): grpc.ServiceClientConstructor {
  const def = componentsDefinition()[`${COMPONENTS_PACKAGE}.${name}`] as grpc.ServiceDefinition | undefined;
  if (!def) throw new Error(`no service ${COMPONENTS_PACKAGE}.${name} in the component protos`);
  return grpc.makeGenericClientConstructor(def, name);
}
