/**
 * How the runtime API answers failures: every handler throws what the building blocks throw
 * (an ApiError of a row of the error table, api/errors.ts, which names its gRPC code; or one
 * with only an HTTP status, mapped by the same table) and `toStatus` turns it into a gRPC
 * status. The message is the ApiError's message; its errorCode travels in the trailing
 * metadata `rt-error-code`, and as the reason of a google.rpc.ErrorInfo in
 * `grpc-status-details-bin` (the ecosystem's rich error model), so clients can branch on it as on
 * the HTTP body's errorCode.
 */
import * as grpc from '@grpc/grpc-js';
import { ApiError, ERROR_DOMAIN, ERROR_INFO_TYPE, errorMessage, type ErrorInfoDetail } from '../../http/errors.ts';
import { statusDetails } from '../../pluggable/errors.ts';
import { grpcCodeOf } from '../../api/errors.ts';

/** A failure with an explicit gRPC code (where the HTTP status does not say enough). */
export class GrpcError extends Error {
  readonly code: grpc.status;
  readonly errorCode: string;
  constructor(code: grpc.status, errorCode: string, message: string) {
    super(message);
    this.name = 'GrpcError';
    this.code = code;
    this.errorCode = errorCode;
  }
}

export const invalidArgument = (errorCode: string, message: string) => new GrpcError(grpc.status.INVALID_ARGUMENT, errorCode, message);

export function toStatus(err: unknown): Partial<grpc.StatusObject> {
  let code: grpc.status;
  let errorCode: string;
  let message: string;
  let info: Pick<ErrorInfoDetail, 'reason' | 'domain' | 'metadata'> | undefined;
  if (err instanceof GrpcError) {
    ({ code, errorCode, message } = err);
  } else if (err instanceof ApiError) {
    code = grpcCodeOf(err);
    errorCode = err.errorCode;
    message = err.message;
    info = ownErrorInfo(err.details);
  } else {
    code = grpc.status.INTERNAL;
    errorCode = 'ERR_INTERNAL';
    message = errorMessage(err);
  }
  // grpc-js sends details as a header: keep it to one line of reasonable length
  const details = oneLine(message);
  // the thrower's own ErrorInfo (e.g. SFTP_FILE_NOT_FOUND with the file name), as the HTTP body has it
  const metadata = statusDetails(code, details, info ?? { reason: errorCode, domain: ERROR_DOMAIN, metadata: {} });
  metadata.set('rt-error-code', errorCode);
  return { code, details, metadata };
}

/** The ErrorInfo a block put in an ApiError's details (string metadata only), if any. */
function ownErrorInfo(details: unknown[]): Pick<ErrorInfoDetail, 'reason' | 'domain' | 'metadata'> | undefined {
  const d = details.find((x): x is ErrorInfoDetail => typeof x === 'object' && x !== null && (x as { '@type'?: unknown })['@type'] === ERROR_INFO_TYPE);
  if (!d || typeof d.reason !== 'string') return undefined;
  const metadata = Object.fromEntries(Object.entries(d.metadata ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string'));
  return { reason: d.reason, domain: typeof d.domain === 'string' ? d.domain : ERROR_DOMAIN, metadata };
}

/**
 * One line of reasonable length, and well-formed: grpc-js percent-encodes the message with
 * encodeURI, which throws on a lone surrogate (a caller's text cut in the middle of a pair, e.g.
 * by JSON.parse's error message) and the call would never be answered.
 */
function oneLine(s: string): string {
  const flat = s.replace(/[\r\n]+/g, ' ');
  return (flat.length > 4000 ? `${flat.slice(0, 4000)}…` : flat).toWellFormed();
}
