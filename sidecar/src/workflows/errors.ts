/**
 * The engine's errors, and the API errorCode each gets. HTTP and the Dapr runtime API's gRPC
 * methods answer the same code for the same case, as the reference runtime does: a conflict or a
 * state that does not allow the operation is ERR_<operation>_WORKFLOW (ERR_PURGE_WORKFLOW for a
 * purge of a running instance, over both).
 */
export type WorkflowErrorCode = 'NOT_FOUND' | 'CONFLICT' | 'INVALID' | 'PRECONDITION';

export class WorkflowError extends Error {
  readonly code: WorkflowErrorCode;
  /** The API error code when it is not the one `code` maps to (e.g. ERR_INSTANCE_ID_TOO_LONG). */
  readonly errorCode?: string;
  constructor(code: WorkflowErrorCode, message: string, errorCode?: string) {
    super(message);
    this.name = 'WorkflowError';
    this.code = code;
    this.errorCode = errorCode;
  }
}

/** The management operations, as their error codes name them. */
export type WorkflowOperation = 'START' | 'GET' | 'TERMINATE' | 'RAISE_EVENT' | 'PAUSE' | 'RESUME' | 'PURGE';

/** The errorCode of an engine error in `op`, for every transport. */
export function errorCodeOf(e: WorkflowError, op: WorkflowOperation): string {
  switch (e.code) {
    case 'NOT_FOUND':
      return 'ERR_INSTANCE_ID_NOT_FOUND';
    case 'INVALID':
      return e.errorCode ?? 'ERR_INSTANCE_ID_INVALID';
    case 'CONFLICT':
    case 'PRECONDITION':
      return `ERR_${op}_WORKFLOW`;
  }
}
