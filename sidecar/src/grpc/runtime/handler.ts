/**
 * Turns an async function into a grpc-js unary handler: checks the API token first, then
 * answers with what the function returns or with the gRPC status of what it threw. A handler
 * never throws into grpc-js, so a bad request cannot take the sidecar down.
 */
import * as grpc from '@grpc/grpc-js';
import { GrpcServer } from '../server.ts';
import { toStatus } from './errors.ts';

/**
 * What a request decodes to when its bytes are not the method's protobuf message. grpc-js
 * would answer INTERNAL for a failed decode; bad input is the caller's: INVALID_ARGUMENT.
 */
export class MalformedMessage {
  readonly message: string;
  constructor(message: string) {
    this.message = message;
  }
}

/** The method definition with a decode that never throws (see MalformedMessage). */
export function tolerantDecode(def: grpc.MethodDefinition<unknown, unknown>, method: string): grpc.MethodDefinition<unknown, unknown> {
  const decode = def.requestDeserialize;
  return {
    ...def,
    requestDeserialize: (buf: Buffer) => {
      try {
        return decode(buf);
      } catch (e) {
        return new MalformedMessage(`the ${method} request is not a valid protobuf message of its type: ${(e as Error).message}`);
      }
    },
  };
}

export type Unary<Req, Res> = (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>;

export function unary<Req, Res>(server: GrpcServer, fn: Unary<Req, Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    if (!server.authorized(call.metadata)) {
      callback(GrpcServer.unauthenticated());
      return;
    }
    if ((call.request as unknown) instanceof MalformedMessage) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: (call.request as unknown as MalformedMessage).message });
      return;
    }
    let p: Promise<Res>;
    try {
      p = fn(call.request, call);
    } catch (e) {
      callback(toStatus(e));
      return;
    }
    p.then(
      (res) => callback(null, res),
      (e: unknown) => callback(toStatus(e)),
    );
  };
}

/** proto3 maps arrive as plain objects; empty means "none". */
export function metadataOf(m: Record<string, string> | null | undefined): Record<string, string> | undefined {
  if (!m) return undefined;
  const keys = Object.keys(m);
  if (keys.length === 0) return undefined;
  // copy into a prototype-less object: a key "__proto__" stays a plain entry
  const out: Record<string, string> = Object.create(null);
  for (const k of keys) out[k] = String(m[k]);
  return { ...out };
}

/** bytes fields arrive as Buffers; absent ones as empty Buffers (defaults: true). */
export function bytesOf(b: Uint8Array | null | undefined): Buffer {
  if (!b) return Buffer.alloc(0);
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}
