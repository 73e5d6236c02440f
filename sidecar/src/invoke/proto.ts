/** Loads the internal sidecar-to-sidecar invocation proto (proto/invoke.proto) once per process. */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../../shared/proto-libs.ts';

export const INTERNAL_SERVICE = 'rt.internal.v1.ServiceInvocation';

export interface Header {
  name: string;
  value: string;
}

export interface Caller {
  app_id: string;
  namespace: string;
  /** Empty until sidecars hold workload certificates; then it comes from the peer's certificate. */
  trust_domain: string;
}

export interface RequestHead {
  method: string;
  path: string;
  query: string;
  headers: Header[];
  caller: Caller;
  target_app_id: string;
  has_body: boolean;
}

export interface ResponseHead {
  status: number;
  headers: Header[];
  error_code: string;
  message: string;
  /** The status of an app that speaks gRPC (absent for an HTTP app's answer). */
  grpc_status?: GrpcStatus | null;
}

export interface GrpcStatus {
  code: number;
  message: string;
  /** grpc-status-details-bin as the app sent it; empty when it sent none. */
  details: Buffer;
}

export interface InvokeChunk {
  request?: RequestHead | null;
  response?: ResponseHead | null;
  data?: Buffer | null;
  part?: 'request' | 'response' | 'data';
}

let service: grpc.ServiceDefinition | undefined;

export function internalService(): grpc.ServiceDefinition {
  service ??= protoLoader().loadSync(join(import.meta.dirname, 'proto', 'invoke.proto'), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true })[INTERNAL_SERVICE] as grpc.ServiceDefinition;
  return service;
}

export function internalClient(): grpc.ServiceClientConstructor {
  return grpc.makeGenericClientConstructor(internalService(), 'ServiceInvocation');
}

/**
 * Channel options of every gRPC client toward another sidecar's internal port (the CallStream
 * hop and proxied gRPC calls): no message size limit of its own (the app's limits apply), and a
 * target restarted on the same port is reconnected at once rather than after a long back-off.
 */
export const PEER_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
};
