/**
 * Types at the boundary between the component registry and component implementations.
 * A built-in component and a pluggable (gRPC over UDS) one implement the same interfaces,
 * so building blocks never know which kind they talk to.
 */
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';

/** Building-block categories: the part of `spec.type` before the first dot. */
export type ComponentCategory =
  | 'state'
  | 'bindings'
  | 'secretstores'
  | 'pubsub'
  | 'configuration'
  | 'lock'
  | 'crypto'
  | 'workflow'
  | 'middleware';

/** A Component resource after loading: scopes checked, secrets and env references resolved. */
export interface ComponentSpec {
  name: string;
  namespace?: string;
  /** Full type, e.g. `state.redis`, `bindings.sftp`. */
  type: string;
  /** e.g. `v1`. */
  version: string;
  /** Plain string values (secretKeyRef and {env} already resolved). */
  metadata: Record<string, string>;
  /** Names of metadata keys whose value came from a secret store: never log their values. */
  secretKeys: string[];
  /** Names of metadata keys whose YAML value was a number or boolean rather than a string. */
  nonStringKeys?: string[];
  initTimeoutMs: number;
  ignoreErrors: boolean;
  scopes: string[];
  annotations: Record<string, string>;
  /** Where it came from, for error messages (file path or `operator`). */
  source: string;
}

/** What every component instance offers to the registry. */
export interface Component {
  /** Reads metadata and connects; throws a clear error when the metadata is wrong. */
  init(spec: ComponentSpec, ctx: ComponentContext): Promise<void>;
  /** Capabilities shown in GET /v1.0/metadata (ETAG, TRANSACTIONAL, INPUT_BINDING …). */
  capabilities(): string[];
  close(): Promise<void>;
  /** Optional liveness, used by /v1.0/healthz/outbound and the pluggable host. */
  ping?(): Promise<void>;
}

export interface ComponentContext {
  appId: string;
  namespace: string;
  /** Address the sidecar's own servers bind to; components that listen (webhooks) use it too. */
  listenAddress?: string;
  log: Logger;
  /** Delivers an input-binding event to the app (POST /<binding-name>). */
  deliverToApp?(bindingName: string, event: InputBindingEvent): Promise<InputBindingReply>;
}

// ---------------------------------------------------------------- state

export type StateFeature = 'ETAG' | 'TRANSACTIONAL' | 'ACTOR' | 'QUERY_API' | 'TTL';

export interface StateItem {
  key: string;
  /** The stored bytes. Values posted as JSON are stored as their JSON text. */
  value: Uint8Array;
  etag?: string;
  metadata?: Record<string, string>;
}

export interface StateOptions {
  /** first-write: an etag is required to overwrite (etag mismatch → error). */
  concurrency?: 'first-write' | 'last-write';
  consistency?: 'eventual' | 'strong';
}

export interface StateSetRequest {
  key: string;
  value: Uint8Array;
  /** When present, the write succeeds only if the stored etag equals it. */
  etag?: string;
  /** e.g. ttlInSeconds, contentType. */
  metadata?: Record<string, string>;
  options?: StateOptions;
}

export interface StateDeleteRequest {
  key: string;
  etag?: string;
  metadata?: Record<string, string>;
  options?: StateOptions;
}

export type StateTransactionOperation =
  | { operation: 'upsert'; request: StateSetRequest }
  | { operation: 'delete'; request: StateDeleteRequest };

export interface StateStore extends Component {
  features(): StateFeature[];
  get(key: string, metadata?: Record<string, string>): Promise<StateItem | undefined>;
  bulkGet(keys: string[], metadata?: Record<string, string>): Promise<(StateItem | undefined)[]>;
  /** Throws EtagMismatchError / EtagInvalidError (components/state/errors.ts). */
  set(req: StateSetRequest): Promise<void>;
  delete(req: StateDeleteRequest): Promise<void>;
  bulkSet(reqs: StateSetRequest[]): Promise<void>;
  bulkDelete(reqs: StateDeleteRequest[]): Promise<void>;
  /** Present when features() includes TRANSACTIONAL: all or nothing. */
  transact?(ops: StateTransactionOperation[], metadata?: Record<string, string>): Promise<void>;
}

// ---------------------------------------------------------------- bindings

export interface BindingRequest {
  operation: string;
  /**
   * `data` exactly as it arrived in the JSON body: a string stays a string (e.g. base64 file
   * content), any other JSON value stays parsed. Use bindingDataBytes() for bytes.
   */
  data: unknown;
  metadata: Record<string, string>;
}

export interface BindingResponse {
  /** Response body: bytes, a stream (large files), or nothing (204). */
  data?: Uint8Array | Readable;
  contentType?: string;
  metadata?: Record<string, string>;
}

/**
 * A request whose `data` string is read from the HTTP body as it arrives (bindings/stream-body.ts):
 * `data` yields the string's content (for files: base64 text) with backpressure, and `complete()`
 * resolves to the request's metadata once the whole body has been read and checked (it rejects
 * with a 400 ApiError on a malformed body). `early` is the metadata when the body named it before
 * `data`, a hint only: complete()'s metadata is the one that counts.
 */
export interface StreamedBindingRequest {
  operation: string;
  data: AsyncIterable<Buffer>;
  early?: Record<string, string>;
  complete(): Promise<Record<string, string>>;
}

export interface OutputBinding extends Component {
  operations(): string[];
  invoke(req: BindingRequest): Promise<BindingResponse>;
  /** Operations whose string `data` the binding takes as a stream (invokeStreamed). */
  streamedOperations?(): string[];
  invokeStreamed?(req: StreamedBindingRequest): Promise<BindingResponse>;
}

export interface InputBindingEvent {
  data: Uint8Array;
  metadata: Record<string, string>;
  contentType?: string;
}

export interface InputBindingReply {
  /** HTTP status the app answered with. */
  status: number;
  body: Uint8Array;
}

export interface InputBinding extends Component {
  /** Starts reading; events go to ctx.deliverToApp. Called after init, once the app is ready. */
  start(): Promise<void>;
}

/** Bytes of a binding request's data: strings as UTF-8, other JSON values as JSON text. */
export function bindingDataBytes(data: unknown): Uint8Array {
  if (data === undefined || data === null) return new Uint8Array();
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (data instanceof Uint8Array) return data;
  return Buffer.from(JSON.stringify(data), 'utf8');
}

// ---------------------------------------------------------------- secrets

export interface SecretStore extends Component {
  /** One secret: a map of keys to values (a plain secret has one key, its own name). */
  getSecret(name: string, metadata?: Record<string, string>): Promise<Record<string, string> | undefined>;
  bulkGetSecret(metadata?: Record<string, string>): Promise<Record<string, Record<string, string>>>;
}

// ---------------------------------------------------------------- factories

/** Creates an uninitialised instance of one component type. */
export type ComponentFactory = () => Component;

export interface ComponentTypeInfo {
  category: ComponentCategory;
  /** Loaded on first use, so that a sidecar never imports an SDK it does not need. */
  load(): Promise<ComponentFactory>;
  /** Versions this implementation answers to; default ['v1']. */
  versions?: string[];
  /** true for types discovered from a pluggable component socket. */
  pluggable?: boolean;
}
