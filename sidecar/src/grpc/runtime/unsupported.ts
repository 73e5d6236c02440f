/**
 * Methods of the runtime API whose building blocks rt does not have. They are registered (not
 * declared in our protos: the request is never decoded) so that a caller learns which block is
 * missing instead of a bare "method not implemented".
 */
import * as grpc from '@grpc/grpc-js';
import { SERVED_BLOCKS } from '../../http/unimplemented.ts';
import { GrpcServer } from '../server.ts';
import { GrpcError, toStatus } from './errors.ts';
import { SERVICE_NAME } from './proto.ts';

type Kind = 'unary' | 'server-stream' | 'bidi';

/** Method → [building block named in the message, call kind]. */
const UNSUPPORTED: Record<string, [string, Kind]> = {
  SubscribeActorEventsAlpha1: ['actor event streaming', 'bidi'],
  SubtleGetKeyAlpha1: ['subtle cryptography', 'unary'],
  SubtleEncryptAlpha1: ['subtle cryptography', 'unary'],
  SubtleDecryptAlpha1: ['subtle cryptography', 'unary'],
  SubtleWrapKeyAlpha1: ['subtle cryptography', 'unary'],
  SubtleUnwrapKeyAlpha1: ['subtle cryptography', 'unary'],
  SubtleSignAlpha1: ['subtle cryptography', 'unary'],
  SubtleVerifyAlpha1: ['subtle cryptography', 'unary'],
  ConverseAlpha1: ['conversation', 'unary'],
  ConverseAlpha2: ['conversation', 'unary'],
};

export const UNSUPPORTED_METHODS = Object.keys(UNSUPPORTED);

function status(method: string, block: string): Partial<grpc.StatusObject> {
  return toStatus(new GrpcError(grpc.status.UNIMPLEMENTED, 'ERR_API_UNIMPLEMENTED', `${method}: rt has no ${block} building block; this sidecar serves ${SERVED_BLOCKS}`));
}

const raw = (b: Buffer) => b;

/** Definitions and handlers to merge into the Dapr service. */
export function unsupportedService(server: GrpcServer): { definition: grpc.ServiceDefinition; handlers: grpc.UntypedServiceImplementation } {
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const [method, [block, kind]] of Object.entries(UNSUPPORTED)) {
    definition[method] = {
      path: `/${SERVICE_NAME}/${method}`,
      requestStream: kind === 'bidi',
      responseStream: kind !== 'unary',
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
      originalName: method,
    };
    if (kind === 'unary') {
      handlers[method] = ((call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        cb(server.authorized(call.metadata) ? status(method, block) : GrpcServer.unauthenticated())) as grpc.handleUnaryCall<Buffer, Buffer>;
    } else {
      handlers[method] = ((call: grpc.ServerWritableStream<Buffer, Buffer> | grpc.ServerDuplexStream<Buffer, Buffer>) =>
        call.emit('error', server.authorized(call.metadata) ? status(method, block) : GrpcServer.unauthenticated())) as grpc.handleServerStreamingCall<Buffer, Buffer>;
    }
  }
  return { definition, handlers };
}
