/**
 * One invocation as both sides of it see it: the call (head and streamed body) and its answer,
 * and the error any failed invocation answers with. Shared by the calling side (invoker.ts), the
 * transports (internal-http.ts, answer.ts), the routes and HTTPEndpoints, so none of them needs
 * another's module for its types.
 */
import type { Readable } from 'node:stream';
import { ApiError } from '../http/errors.ts';
import type { AppGrpcStatus } from './grpc-status.ts';
import type { Header } from './proto.ts';

export interface InvokeCall {
  method: string;
  /** With a leading slash, percent-encoding as sent. */
  path: string;
  /** With its '?' when the caller sent one (an empty query stays as sent), else ''. */
  query: string;
  headers: Header[];
  body?: Readable;
  signal?: AbortSignal;
}

export interface InvokeAnswer {
  status: number;
  headers: Header[];
  body: Readable;
  /**
   * Set when the target app speaks gRPC: the status its OnInvoke answered with (OK included).
   * `status` and `body` are then what an HTTP caller gets (grpc-status.ts); a gRPC caller gets this.
   */
  grpcStatus?: AppGrpcStatus;
}

/** 500 ERR_DIRECT_INVOKE, the answer users of this API expect for any failed invocation. */
export function directInvokeError(appId: string, reason: string): ApiError {
  return new ApiError(500, 'ERR_DIRECT_INVOKE', `failed to invoke, id: ${appId}, err: ${reason}`);
}
