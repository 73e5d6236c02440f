/**
 * The one table of the errors the API's operations answer with. Each row is one case: its
 * errorCode, the HTTP status and the gRPC code it gets. A building block's service throws
 * `fail(ERRORS.X, message)` (or `failAs(ERRORS.X, code, message)` for a row whose code is the
 * operation's, e.g. ERR_STATE_SAVE or ERR_STATE_DELETE for an etag mismatch); the HTTP server
 * answers `row.http` with {"errorCode","message","details"} (http/server.ts), the gRPC runtime
 * API `row.grpc` with the errorCode in an ErrorInfo (grpc/runtime/errors.ts). No transport maps
 * an error on its own.
 *
 * An ApiError thrown without a row (a component's own, e.g. SFTP_FILE_NOT_FOUND, or a block not
 * on the table yet) gets the gRPC code of its HTTP status from grpcCodeForStatus().
 *
 * gRPC codes are written as the numbers the gRPC spec fixes, so that this module (which every
 * HTTP request's errors go through) never loads @grpc/grpc-js.
 */
import { ApiError } from '../http/errors.ts';

/** gRPC's canonical status codes (google.rpc.Code). */
export const GRPC = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export interface ErrorRow {
  /** The errorCode; absent when it is the failing operation's own (the thrower names it). */
  readonly code?: string;
  readonly http: number;
  readonly grpc: number;
  /** When it happens, in a few words (also the documentation of the row). */
  readonly when: string;
}

const { INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, INTERNAL, UNAVAILABLE } = GRPC;

export const ERRORS = {
  // any operation
  MALFORMED: { code: 'ERR_MALFORMED_REQUEST', http: 400, grpc: INVALID_ARGUMENT, when: 'a member is missing, of the wrong type or out of range' },

  // state: ERR_STATE_GET, _BULK_GET, _SAVE, _DELETE, _TRANSACTION, _QUERY name the operation
  STATE_STORE_NOT_FOUND: { code: 'ERR_STATE_STORE_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'no state store of that name is loaded' },
  STATE_STORE_NOT_CONFIGURED: { code: 'ERR_STATE_STORE_NOT_CONFIGURED', http: 500, grpc: INTERNAL, when: "the store's keyPrefix cannot be used" },
  STATE_NOT_SUPPORTED: { code: 'ERR_STATE_STORE_NOT_SUPPORTED', http: 400, grpc: INVALID_ARGUMENT, when: 'the store has no transactions, or no query API' },
  STATE_OPERATION_NOT_SUPPORTED: { code: 'ERR_NOT_SUPPORTED_STATE_OPERATION', http: 400, grpc: INVALID_ARGUMENT, when: 'a transaction operation other than upsert or delete' },
  STATE_ETAG_MISMATCH: { http: 409, grpc: ABORTED, when: "the etag sent is not the item's" },
  STATE_ETAG_INVALID: { http: 400, grpc: INVALID_ARGUMENT, when: 'the etag sent cannot be one of the store' },
  STATE_QUERY_INVALID: { code: 'ERR_STATE_QUERY', http: 400, grpc: INVALID_ARGUMENT, when: 'the store refused the query' },
  STATE_STORE_FAILED: { http: 500, grpc: INTERNAL, when: 'the store failed' },

  // bindings
  BINDING_NOT_FOUND: { code: 'ERR_BINDING_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'no output binding of that name is loaded' },
  BINDING_OPERATION_NOT_SUPPORTED: { code: 'ERR_INVOKE_OUTPUT_BINDING', http: 400, grpc: INVALID_ARGUMENT, when: 'the binding has no such operation' },
  BINDING_FAILED: { code: 'ERR_INVOKE_OUTPUT_BINDING', http: 500, grpc: INTERNAL, when: 'the binding failed' },
  BINDING_RESPONSE_TOO_LARGE: { code: 'ERR_INVOKE_OUTPUT_BINDING', http: 413, grpc: RESOURCE_EXHAUSTED, when: "the binding's answer exceeds a gRPC message (HTTP streams it)" },

  // distributed lock: ERR_TRY_LOCK, ERR_UNLOCK name the operation
  LOCK_STORE_NOT_FOUND: { code: 'ERR_LOCK_STORE_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'no lock store of that name is loaded' },
  LOCK_FAILED: { http: 500, grpc: INTERNAL, when: 'the lock store failed' },

  // configuration
  CONFIGURATION_STORE_NOT_FOUND: { code: 'ERR_CONFIGURATION_STORE_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'no configuration store of that name is loaded' },
  CONFIGURATION_GET_FAILED: { code: 'ERR_CONFIGURATION_GET', http: 500, grpc: INTERNAL, when: 'the store failed a get' },
  CONFIGURATION_SUBSCRIBE_INVALID: { code: 'ERR_CONFIGURATION_SUBSCRIBE', http: 400, grpc: INVALID_ARGUMENT, when: 'the store refused the subscription for what it asks (e.g. no notify channel)' },
  CONFIGURATION_SUBSCRIBE_FAILED: { code: 'ERR_CONFIGURATION_SUBSCRIBE', http: 500, grpc: INTERNAL, when: 'the store failed to start listening' },
  CONFIGURATION_SUBSCRIPTION_NOT_FOUND: { code: 'ERR_CONFIGURATION_UNSUBSCRIBE', http: 404, grpc: NOT_FOUND, when: 'unsubscribing an id that is not an active subscription (of that store)' },
  CONFIGURATION_NO_APP: { code: 'ERR_APP_CHANNEL_NIL', http: 500, grpc: FAILED_PRECONDITION, when: 'an HTTP subscription on a sidecar without an app to deliver to' },

  // cryptography: the reference's codes; what the caller sent (names, keys, ciphertext) is a 400, not its 500
  CRYPTO_PROVIDERS_NOT_CONFIGURED: { code: 'ERR_CRYPTO_PROVIDERS_NOT_CONFIGURED', http: 400, grpc: INVALID_ARGUMENT, when: 'no crypto component is loaded' },
  CRYPTO_PROVIDER_NOT_FOUND: { code: 'ERR_CRYPTO_PROVIDER_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'no crypto component of that name is loaded' },
  CRYPTO_BAD_REQUEST: { code: 'ERR_BAD_REQUEST', http: 400, grpc: INVALID_ARGUMENT, when: 'a required option or header is missing; a stream chunk out of sequence' },
  CRYPTO_INVALID: { code: 'ERR_CRYPTO', http: 400, grpc: INVALID_ARGUMENT, when: 'an algorithm or cipher not supported, a key missing or unfit, a ciphertext altered, cut off or not of the format' },
  CRYPTO_FAILED: { code: 'ERR_CRYPTO', http: 500, grpc: INTERNAL, when: 'the crypto component failed (e.g. reading its key)' },

  // actors: ERR_ACTOR_REMINDER_CREATE, _GET, _DELETE, ERR_ACTOR_TIMER_CREATE, _DELETE name the operation
  ACTOR_RUNTIME_NOT_FOUND: { code: 'ERR_ACTOR_RUNTIME_NOT_FOUND', http: 500, grpc: INTERNAL, when: 'actor state without a state store marked actorStateStore: "true"' },
  ACTOR_INSTANCE_MISSING: { code: 'ERR_ACTOR_INSTANCE_MISSING', http: 400, grpc: INVALID_ARGUMENT, when: 'actor state or a timer for an actor this sidecar does not host' },
  ACTOR_INVOKE_FAILED: { code: 'ERR_ACTOR_INVOKE_METHOD', http: 500, grpc: INTERNAL, when: "no host of the type is known, the app did not answer, or the actor's turn did not come in time" },
  ACTOR_STACK_DEPTH: { code: 'ERR_ACTOR_STACK_DEPTH', http: 500, grpc: RESOURCE_EXHAUSTED, when: 'a reentrant chain went past its maximum stack depth (the reference: messages.ErrActorMaxStackDepthExceeded)' },
  ACTOR_STATE_GET_FAILED: { code: 'ERR_ACTOR_STATE_GET', http: 500, grpc: INTERNAL, when: 'the actor state store failed a get' },
  ACTOR_STATE_TRANSACTION_FAILED: { code: 'ERR_ACTOR_STATE_TRANSACTION_SAVE', http: 500, grpc: INTERNAL, when: 'the actor state store failed the transaction' },
  ACTOR_SCHEDULE_INVALID: { http: 400, grpc: INVALID_ARGUMENT, when: "a timer's or reminder's dueTime, period or ttl that does not parse, or a timer for an actor that is not active" },
  ACTOR_REMINDER_NOT_FOUND: { code: 'ERR_ACTOR_REMINDER_NOT_FOUND', http: 404, grpc: NOT_FOUND, when: 'getting a reminder that does not exist (the reference: messages.ErrActorReminderNotFound)' },
  ACTOR_REMINDER_EXISTS: { code: 'ERR_ACTOR_REMINDER_ALREADY_EXISTS', http: 409, grpc: ALREADY_EXISTS, when: 'registering a reminder with overwrite false under a name that exists' },
  ACTOR_OPERATION_FAILED: { http: 500, grpc: INTERNAL, when: 'the scheduler (reminders) failed or is not configured' },

  // jobs: RT_SCHEDULER_SCHEDULE_JOB, _GET_JOB, _DELETE_JOB, _LIST_JOBS name the operation
  JOB_INVALID: { http: 400, grpc: INVALID_ARGUMENT, when: 'a name, schedule, dueTime, ttl, repeats or failure policy the scheduler refuses (RT_SCHEDULER_*_INVALID, _EMPTY)' },
  JOB_EXISTS: { code: 'RT_SCHEDULER_JOB_EXISTS', http: 409, grpc: ALREADY_EXISTS, when: 'scheduling a name that exists, without overwrite' },
  JOB_NOT_FOUND: { http: 500, grpc: NOT_FOUND, when: "getting a job that does not exist (the contract's 500 over HTTP)" },
  JOB_NO_SCHEDULER: { http: 500, grpc: FAILED_PRECONDITION, when: 'no scheduler is configured' },
  JOB_SCHEDULER_UNAVAILABLE: { http: 500, grpc: UNAVAILABLE, when: 'the scheduler does not answer' },
  JOB_FAILED: { http: 500, grpc: INTERNAL, when: 'the scheduler failed' },

  // workflows (HTTP /v1.0*/workflows and the gRPC *WorkflowBeta1/Alpha1 methods): ERR_START_WORKFLOW,
  // _GET_, _TERMINATE_, _RAISE_EVENT_, _PAUSE_, _RESUME_, _PURGE_WORKFLOW name the operation
  WORKFLOW_COMPONENT_NOT_FOUND: { code: 'ERR_WORKFLOW_COMPONENT_NOT_FOUND', http: 400, grpc: INVALID_ARGUMENT, when: 'a workflow component other than "rt" (or "dapr")' },
  WORKFLOW_NAME_MISSING: { code: 'ERR_WORKFLOW_NAME_MISSING', http: 400, grpc: INVALID_ARGUMENT, when: 'starting without a workflow name' },
  WORKFLOW_EVENT_NAME_MISSING: { code: 'ERR_WORKFLOW_EVENT_NAME_MISSING', http: 400, grpc: INVALID_ARGUMENT, when: 'raising an event without its name' },
  WORKFLOW_INSTANCE_INVALID: { http: 400, grpc: INVALID_ARGUMENT, when: 'an instance id that cannot be one (ERR_INSTANCE_ID_INVALID, ERR_INSTANCE_ID_TOO_LONG)' },
  WORKFLOW_INSTANCE_NOT_FOUND: { code: 'ERR_INSTANCE_ID_NOT_FOUND', http: 404, grpc: NOT_FOUND, when: 'no workflow instance with that id' },
  WORKFLOW_EXISTS: { http: 409, grpc: ALREADY_EXISTS, when: 'starting an id whose instance still runs' },
  WORKFLOW_FAILED: { http: 500, grpc: INTERNAL, when: 'the engine or its store failed' },
  WORKFLOW_STATE_REFUSES: { http: 409, grpc: FAILED_PRECONDITION, when: 'the instance\'s state does not allow it: purging a running one, pausing or resuming a finished one' },
} as const satisfies Record<string, ErrorRow>;

type RowWithCode = ErrorRow & { readonly code: string };
type RowWithoutCode = ErrorRow & { readonly code?: undefined };

/** The error of a row that has its own code. */
export function fail(row: RowWithCode, message: string, details?: unknown[]): ApiError {
  return new ApiError(row.http, row.code, message, details, row.grpc);
}

/** The error of a row whose code is the failing operation's (or a validator's). */
export function failAs(row: RowWithoutCode, code: string, message: string, details?: unknown[]): ApiError {
  return new ApiError(row.http, code, message, details, row.grpc);
}

/** The gRPC code of an ApiError: its row's, else the one of its HTTP status. */
export function grpcCodeOf(err: ApiError): number {
  return err.grpc ?? grpcCodeForStatus(err.status);
}

/** HTTP status → gRPC code, for ApiErrors thrown without a row. 409 is ABORTED (an etag mismatch). */
export function grpcCodeForStatus(status: number): number {
  switch (status) {
    case 400:
    case 422:
      return INVALID_ARGUMENT;
    case 401:
      return GRPC.UNAUTHENTICATED;
    case 403:
      return GRPC.PERMISSION_DENIED;
    case 404:
      return NOT_FOUND;
    case 409:
      return ABORTED;
    case 413:
      return RESOURCE_EXHAUSTED;
    case 501:
      return GRPC.UNIMPLEMENTED;
    case 503:
      return UNAVAILABLE;
    case 504:
      return GRPC.DEADLINE_EXCEEDED;
    default:
      return status >= 400 && status < 500 ? FAILED_PRECONDITION : INTERNAL;
  }
}
