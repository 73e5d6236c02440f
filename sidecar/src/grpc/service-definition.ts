/**
 * A gRPC service definition straight from protobufjs, for services the sidecar serves at start.
 * It encodes and decodes exactly as @grpc/proto-loader's `loadSync` does (`fromObject` + `encode`,
 * `decode` + `toObject(options)`), but leaves out what only reflection and generated clients
 * read: proto-loader builds a DescriptorProto for every message and enum of the loaded files
 * and encodes every file descriptor, which was most of the sidecar's proto loading time at start
 * (bench/README.md, ### startup).
 */
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import type * as protobuf from 'protobufjs';
import { protobufjs } from '../../../shared/proto-libs.ts';

export interface LightLoadOptions extends protobuf.IConversionOptions {
  /** Field names as written in the .proto (snake_case) instead of camelCase. */
  keepCase?: boolean;
  /** Folders import paths are looked up in (google/protobuf/* come with protobufjs). */
  includeDirs?: string[];
}

/** The `grpc.ServiceDefinition` of `serviceName` (package-qualified) defined in `file`. */
export function loadServiceDefinition(file: string, serviceName: string, options: LightLoadOptions): grpc.ServiceDefinition {
  const pb = protobufjs();
  const root = new pb.Root();
  const includeDirs = options.includeDirs ?? [];
  root.resolvePath = (origin, target) => {
    if (isAbsolute(target)) return target;
    for (const dir of includeDirs) {
      const full = join(dir, target);
      if (existsSync(full)) return full;
    }
    return pb.util.path.resolve(origin, target);
  };
  root.loadSync(file, { keepCase: options.keepCase ?? false });
  root.resolveAll();
  const service = root.lookupService(serviceName);
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methodsArray) {
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    definition[method.name] = {
      path: `/${serviceName}/${method.name}`,
      requestStream: Boolean(method.requestStream),
      responseStream: Boolean(method.responseStream),
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request, options),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response, options),
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return definition;
}

function serializer(type: protobuf.Type): (value: unknown) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    // a Buffer already: protobufjs writes into Buffers on Node
    return type.encode(type.fromObject(value as Record<string, unknown>)).finish() as Buffer;
  };
}

function deserializer(type: protobuf.Type, options: protobuf.IConversionOptions): (bytes: Buffer) => unknown {
  return (bytes) => type.toObject(type.decode(bytes), options);
}
