/**
 * What a component's gRPC errors mean to rt. Etag errors follow the ecosystem: status
 * FAILED_PRECONDITION or ABORTED = etag mismatch, INVALID_ARGUMENT on a request with an etag =
 * invalid etag; a google.rpc.ErrorInfo detail whose reason names ETAG_MISMATCH / ETAG_INVALID
 * decides first.
 */
import * as grpc from '@grpc/grpc-js';
import type * as protobuf from 'protobufjs';
import { protobufjs } from '../../../shared/proto-libs.ts';
import { join } from 'node:path';
import { EtagInvalidError, EtagMismatchError } from '../components/state/errors.ts';

const ERROR_DETAILS_PROTO = join(import.meta.dirname, '..', 'invoke', 'proto', 'error-details.proto');

export const ETAG_MISMATCH_REASON = 'ETAG_MISMATCH';
export const ETAG_INVALID_REASON = 'ETAG_INVALID';
const STATUS_DETAILS_HEADER = 'grpc-status-details-bin';
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

/** The component could not be reached: it is reported unhealthy and rt reconnects. */
export class ComponentUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ComponentUnavailableError';
  }
}

let root: protobuf.Root | undefined;
function statusTypes(): { Status: protobuf.Type; ErrorInfo: protobuf.Type } {
  // google.rpc.Status and ErrorInfo: the one copy, beside the other error details rt reads
  root ??= protobufjs().loadSync(ERROR_DETAILS_PROTO);
  return { Status: root.lookupType('google.rpc.Status'), ErrorInfo: root.lookupType('google.rpc.ErrorInfo') };
}

export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/** The google.rpc.ErrorInfo details of a gRPC error, if the component sent any. */
export function errorInfos(err: grpc.ServiceError): ErrorInfo[] {
  const raw = err.metadata?.get(STATUS_DETAILS_HEADER)?.[0];
  if (!Buffer.isBuffer(raw)) return [];
  try {
    const { Status, ErrorInfo } = statusTypes();
    const st = Status.toObject(Status.decode(raw), { defaults: true }) as { details: { type_url: string; value: Uint8Array }[] };
    return st.details
      .filter((d) => d.type_url === ERROR_INFO_TYPE)
      .map((d) => ErrorInfo.toObject(ErrorInfo.decode(d.value), { defaults: true }) as ErrorInfo);
  } catch {
    return []; // undecodable details: fall back to the status code
  }
}

/** Encodes `grpc-status-details-bin` for an error with one ErrorInfo (used by components). */
export function statusDetails(code: grpc.status, message: string, info: ErrorInfo): grpc.Metadata {
  const { Status, ErrorInfo } = statusTypes();
  const detail = { type_url: ERROR_INFO_TYPE, value: ErrorInfo.encode(ErrorInfo.fromObject(info)).finish() };
  const md = new grpc.Metadata();
  md.set(STATUS_DETAILS_HEADER, Buffer.from(Status.encode(Status.fromObject({ code, message, details: [detail] })).finish()));
  return md;
}

export function isServiceError(e: unknown): e is grpc.ServiceError {
  return e instanceof Error && typeof (e as grpc.ServiceError).code === 'number';
}

/**
 * Whether the error means the socket is gone or does not answer (not an answer of the
 * component). rt never cancels unary calls itself, so CANCELLED means the server dropped the call.
 */
export function isUnavailable(e: unknown): boolean {
  if (!isServiceError(e)) return false;
  return e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.CANCELLED || (e.code === grpc.status.INTERNAL && /connection|stream|socket/i.test(e.details));
}

export interface CallContext {
  /** e.g. `state store "orders"`. */
  what: string;
  path: string;
  method: string;
  /** The key an etag error is about. */
  key?: string;
  /** A state write (set, delete, bulk, transaction): etag errors are mapped. */
  write?: boolean;
  /** Whether the request carried an etag (INVALID_ARGUMENT then means an invalid etag). */
  withEtag?: boolean;
  /** Error for INVALID_ARGUMENT (the request was refused, e.g. a bad ttlInSeconds). */
  badRequest?: (message: string) => Error;
}

/** Turns a failed call into the error the building blocks understand. */
export function toComponentError(e: unknown, c: CallContext): Error {
  if (!isServiceError(e)) return e instanceof Error ? e : new Error(String(e));
  const key = c.key ?? '';
  const reasons = errorInfos(e).map((i) => i.reason.toUpperCase());
  const detail = e.details || grpc.status[e.code];
  if (c.write && reasons.some((r) => r.includes(ETAG_MISMATCH_REASON))) return new EtagMismatchError(key, `possible etag mismatch for key "${key}": ${detail}`);
  if (c.write && reasons.some((r) => r.includes(ETAG_INVALID_REASON))) return new EtagInvalidError(key, `invalid etag for key "${key}": ${detail}`);
  if (c.write && (e.code === grpc.status.FAILED_PRECONDITION || e.code === grpc.status.ABORTED)) {
    return new EtagMismatchError(key, `possible etag mismatch for key "${key}": ${detail}`);
  }
  if (c.write && e.code === grpc.status.INVALID_ARGUMENT && c.withEtag && reasons.length === 0) return new EtagInvalidError(key, `invalid etag for key "${key}": ${detail}`);
  if (isUnavailable(e)) {
    return new ComponentUnavailableError(
      `pluggable ${c.what} is unavailable (socket ${c.path}, ${c.method}): ${detail}; it is reported unhealthy and rt reconnects when the component is back`,
      { cause: e },
    );
  }
  if (e.code === grpc.status.INVALID_ARGUMENT && c.badRequest) return c.badRequest(`pluggable ${c.what} refused ${c.method}: ${detail}`);
  if (e.code === grpc.status.DEADLINE_EXCEEDED) return new Error(`pluggable ${c.what} did not answer ${c.method} in time (socket ${c.path})`, { cause: e });
  return new Error(`pluggable ${c.what} failed ${c.method}: ${grpc.status[e.code]}: ${detail}`, { cause: e });
}
