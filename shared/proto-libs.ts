/**
 * protobufjs and @grpc/proto-loader, loaded with the first proto that needs them rather than at
 * start: proto-loader's module evaluation alone builds protobufjs's descriptor.proto types (~20 ms
 * and several MB), and a sidecar whose clients never speak gRPC needs neither. Synchronous
 * `require`, since the proto loaders are synchronous (in the compiled build, a bundled module
 * evaluated on its first call: images/bundle.ts).
 */
import { createRequire } from 'node:module';
import type * as ProtoLoader from '@grpc/proto-loader';
import type * as Protobuf from 'protobufjs';

const require = createRequire(import.meta.url);
let protobuf: typeof Protobuf | undefined;
let loader: typeof ProtoLoader | undefined;

export function protobufjs(): typeof Protobuf {
  return (protobuf ??= require('protobufjs') as typeof Protobuf);
}

export function protoLoader(): typeof ProtoLoader {
  return (loader ??= require('@grpc/proto-loader') as typeof ProtoLoader);
}
