/**
 * protobufjs and @grpc/proto-loader, loaded with the first proto that needs them rather than at
 * start: proto-loader's module evaluation alone builds protobufjs's descriptor.proto types (~20 ms
 * and several MB), and a sidecar whose clients never speak gRPC needs neither. Synchronous
 * `require`, since the proto loaders are synchronous; both packages stay in node_modules in the
 * compiled build (images/bundle.ts), so every user shares one protobufjs.
 */
import { createRequire } from 'node:module';
import type * as ProtoLoader from '@grpc/proto-loader';
import type * as Protobuf from 'protobufjs';

const load = createRequire(import.meta.url);
let protobuf: typeof Protobuf | undefined;
let loader: typeof ProtoLoader | undefined;

export function protobufjs(): typeof Protobuf {
  return (protobuf ??= load('protobufjs') as typeof Protobuf);
}

export function protoLoader(): typeof ProtoLoader {
  return (loader ??= load('@grpc/proto-loader') as typeof ProtoLoader);
}
