/**
 * The one error shape every API answers with: {"errorCode", "message", "details"}.
 * Building blocks throw ApiError; the HTTP layer turns it (and anything else) into JSON.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly errorCode: string;
  readonly details: unknown[];

  constructor(status: number, errorCode: string, message: string, details: unknown[] = []) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.errorCode = errorCode;
    this.details = details;
  }

  toJSON(): ErrorBody {
    return { errorCode: this.errorCode, message: this.message, details: this.details };
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
