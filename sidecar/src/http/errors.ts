/**
 * The one error shape every API answers with: {"errorCode", "message", "details"}.
 * Building blocks throw ApiError; the HTTP layer turns it (and anything else) into JSON.
 * `details` ends with a google.rpc.ErrorInfo whose reason is the errorCode, as the ecosystem's
 * rich error model has it (the gRPC API sends the same in grpc-status-details-bin); what a
 * block put in `details` itself stays first, where its readers look.
 */

export const ERROR_DOMAIN = 'rt.io';
export const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

export interface ErrorInfoDetail {
  '@type': typeof ERROR_INFO_TYPE;
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

export function errorInfo(reason: string, metadata: Record<string, string> = {}): ErrorInfoDetail {
  return { '@type': ERROR_INFO_TYPE, reason, domain: ERROR_DOMAIN, metadata };
}

/** `details` with an ErrorInfo for `errorCode` added last, unless the thrower already gave one. */
export function withErrorInfo(errorCode: string, details: unknown[]): unknown[] {
  const has = details.some((d) => typeof d === 'object' && d !== null && (d as { '@type'?: unknown })['@type'] === ERROR_INFO_TYPE);
  return has ? details : [...details, errorInfo(errorCode)];
}

/** An error body as every API answers it. */
export function errorBody(errorCode: string, message: string, details: unknown[] = []): ErrorBody {
  return { errorCode, message, details: withErrorInfo(errorCode, details) };
}
export class ApiError extends Error {
  readonly status: number;
  readonly errorCode: string;
  readonly details: unknown[];
  /** The gRPC code, when the error comes from a row of the error table (api/errors.ts); else derived from `status`. */
  readonly grpc?: number;

  constructor(status: number, errorCode: string, message: string, details: unknown[] = [], grpc?: number) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.errorCode = errorCode;
    this.details = details;
    if (grpc !== undefined) this.grpc = grpc;
  }

  toJSON(): ErrorBody {
    return errorBody(this.errorCode, this.message, this.details);
  }
}

export interface ErrorBody {
  errorCode: string;
  message: string;
  details: unknown[];
}

export const badRequest = (errorCode: string, message: string, details?: unknown[]) =>
  new ApiError(400, errorCode, message, details);

export const malformed = (message: string, details?: unknown[]) =>
  new ApiError(400, 'ERR_MALFORMED_REQUEST', message, details);

export const notFound = (errorCode: string, message: string) => new ApiError(404, errorCode, message);

export const conflict = (errorCode: string, message: string) => new ApiError(409, errorCode, message);

export const internal = (errorCode: string, message: string, details?: unknown[]) =>
  new ApiError(500, errorCode, message, details);

/** Message of an unknown thrown value, for wrapping into an ApiError. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
