/**
 * The state building block, one method per operation for both API surfaces (HTTP routes.ts,
 * gRPC grpc/runtime/state.ts): each finds the store, checks what the caller sent (keys, bulk
 * sizes, ttlInSeconds, transaction operations), prefixes keys, calls the store and turns what
 * it throws into a row of the error table (api/errors.ts). The transports only decode their
 * requests into the store's request shapes (keys as the caller knows them) and encode answers.
 * Every store call goes through the store's outbound resiliency policy, when one applies.
 */
import { ERRORS, fail, failAs } from '../api/errors.ts';
import { ttlSeconds } from '../components/state/common.ts';
import { EtagInvalidError, EtagMismatchError, StateRequestError } from '../components/state/errors.ts';
import { isQueryable, parseQuery, type QueryHit } from '../components/state/query.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { StateDeleteRequest, StateItem, StateSetRequest, StateStore, StateTransactionOperation } from '../components/types.ts';
import { ApiError, errorMessage, malformed } from '../http/errors.ts';
import type { ResiliencyService } from '../resiliency/service.ts';
import type { RunOptions } from '../resiliency/run.ts';
import { checkKey, keyPrefixFor } from './keys.ts';

/** One operation of a transaction as a transport decoded it; `operation` is checked here. */
export interface TransactionRequestOperation {
  operation: string;
  request: StateSetRequest | StateDeleteRequest | null | undefined;
}

/**
 * Most keys, items or operations in one bulk get, save or transaction. Each store call of a
 * request runs in one piece (an embedded store on the event loop): an unbounded one stalled the
 * whole sidecar for minutes. Larger sets go in several requests.
 */
export const MAX_BULK_ITEMS = 10_000;

export interface StoreRef {
  name: string;
  /** The component's type (state.redis, …): the default resiliency policies go by it. */
  type: string;
  store: StateStore;
  /** '' or `<prefix>||`. */
  prefix: string;
}

export type StateErrorCode = 'ERR_STATE_SAVE' | 'ERR_STATE_GET' | 'ERR_STATE_DELETE' | 'ERR_STATE_BULK_GET' | 'ERR_STATE_TRANSACTION' | 'ERR_STATE_QUERY';

const VERB: Record<StateErrorCode, string> = {
  ERR_STATE_SAVE: 'saving state in',
  ERR_STATE_GET: 'getting state from',
  ERR_STATE_DELETE: 'deleting state from',
  ERR_STATE_BULK_GET: 'getting state in bulk from',
  ERR_STATE_TRANSACTION: 'running a transaction on',
  ERR_STATE_QUERY: 'querying',
};

export class StateService {
  private readonly components: ComponentRegistry;
  private readonly appId: string;
  private readonly namespace: string;
  /** Resolved stores by name; cleared whenever a component is added or removed. */
  private readonly cache = new Map<string, StoreRef>();
  private readonly resiliency?: ResiliencyService;

  constructor(components: ComponentRegistry, appId: string, namespace: string, resiliency?: ResiliencyService) {
    this.components = components;
    this.appId = appId;
    this.namespace = namespace;
    this.resiliency = resiliency;
    components.onChange(() => this.cache.clear());
  }

  /** The store called `name`, or a 400 listing the loaded ones. */
  store(name: string): StoreRef {
    const hit = this.cache.get(name);
    if (hit) return hit;
    const loaded = this.components.get(name);
    const store = this.components.stateStore(name);
    if (!loaded || !store) {
      const names = this.components.namesOf('state');
      const known = names.length ? `loaded state stores: ${names.join(', ')}` : 'no state store is loaded';
      throw fail(ERRORS.STATE_STORE_NOT_FOUND, `state store "${clip(name)}" is not found (${known})${this.components.notLoadedNote(name)}`, [{ loaded: names }]);
    }
    let prefix: string;
    try {
      prefix = keyPrefixFor(loaded.spec.metadata.keyPrefix, name, this.appId, this.namespace);
    } catch (e) {
      throw fail(ERRORS.STATE_STORE_NOT_CONFIGURED, errorMessage(e));
    }
    const ref = { name, type: loaded.spec.type, store, prefix };
    this.cache.set(name, ref);
    return ref;
  }

  /** A transactional store, or a 400 saying this one is not. */
  transactional(name: string): StoreRef & { store: Required<Pick<StateStore, 'transact'>> & StateStore } {
    const ref = this.store(name);
    if (typeof ref.store.transact !== 'function' || !ref.store.features().includes('TRANSACTIONAL')) {
      throw fail(ERRORS.STATE_NOT_SUPPORTED, `state store "${name}" does not support transactions`);
    }
    return ref as StoreRef & { store: Required<Pick<StateStore, 'transact'>> & StateStore };
  }

  /** One item; undefined when the store does not hold it. */
  async get(name: string, key: string, metadata?: Record<string, string>): Promise<StateItem | undefined> {
    const ref = this.store(name);
    const stored = ref.prefix + checkKey(key);
    checkTtl(metadata, 'metadata');
    return this.guarded(ref, 'ERR_STATE_GET', () => ref.store.get(stored, metadata));
  }

  /** Items in the order of `keys` (as the caller sent them, without the prefix); undefined where absent. */
  async bulkGet(name: string, keys: string[], metadata?: Record<string, string>): Promise<(StateItem | undefined)[]> {
    const ref = this.store(name);
    checkBulkSize(keys.length, 'keys');
    const stored = keys.map((k, i) => ref.prefix + checkKeyAt(k, `keys[${i}]`));
    checkTtl(metadata, 'metadata');
    if (stored.length === 0) return [];
    return this.guarded(ref, 'ERR_STATE_BULK_GET', () => ref.store.bulkGet(stored, metadata));
  }

  /** Saves items, one store call for all of them. */
  async save(name: string, items: StateSetRequest[]): Promise<void> {
    const ref = this.store(name);
    checkBulkSize(items.length, 'states');
    const reqs = items.map((item, i) => setRequest(ref, item, `states[${i}]`));
    if (reqs.length === 0) return;
    await this.guarded(ref, 'ERR_STATE_SAVE', () => (reqs.length === 1 ? ref.store.set(reqs[0]) : ref.store.bulkSet(reqs)));
  }

  async delete(name: string, request: StateDeleteRequest): Promise<void> {
    const ref = this.store(name);
    const del = deleteRequest(ref, request, 'request');
    await this.guarded(ref, 'ERR_STATE_DELETE', () => ref.store.delete(del));
  }

  /** Deletes items, one store call for all of them (the gRPC API's DeleteBulkState). */
  async bulkDelete(name: string, requests: StateDeleteRequest[]): Promise<void> {
    const ref = this.store(name);
    checkBulkSize(requests.length, 'states');
    const dels = requests.map((r, i) => deleteRequest(ref, r, `states[${i}]`));
    if (dels.length === 0) return;
    await this.guarded(ref, 'ERR_STATE_DELETE', () => ref.store.bulkDelete(dels));
  }

  /** Upserts and deletes, all or none. */
  async transact(name: string, operations: TransactionRequestOperation[], metadata?: Record<string, string>): Promise<void> {
    const ref = this.transactional(name);
    checkBulkSize(operations.length, 'operations');
    const ops: StateTransactionOperation[] = operations.map((op, i) => {
      const where = `operations[${i}]`;
      if (op.operation === 'upsert') return { operation: 'upsert', request: setRequest(ref, op.request as StateSetRequest | undefined, `${where}.request`) };
      if (op.operation === 'delete') return { operation: 'delete', request: deleteRequest(ref, op.request, `${where}.request`) };
      throw fail(ERRORS.STATE_OPERATION_NOT_SUPPORTED, `${where}.operation "${String(op.operation).slice(0, 40)}" is not supported: use "upsert" or "delete"`);
    });
    checkTtl(metadata, 'metadata');
    if (ops.length === 0) return;
    await this.guarded(ref, 'ERR_STATE_TRANSACTION', () => ref.store.transact(ops, metadata));
  }

  /**
   * The query API (alpha): `query` is the query as a parsed JSON value; `metadata` goes to the
   * store (e.g. a partition key). Result keys come back without the store's key prefix.
   * Whatever the store throws is ERR_STATE_QUERY: 400 when it refused the query as invalid,
   * 500 otherwise.
   */
  async query(name: string, query: unknown, metadata?: Record<string, string>): Promise<{ results: QueryHit[]; token?: string; metadata?: Record<string, string> }> {
    const ref = this.store(name);
    const store = ref.store;
    if (!isQueryable(store)) throw fail(ERRORS.STATE_NOT_SUPPORTED, `state store "${ref.name}" does not support the query API`);
    let parsed;
    try {
      parsed = parseQuery(query, { opaqueToken: store.opaqueQueryTokens === true });
    } catch (e) {
      if (e instanceof StateRequestError) throw malformed(`query: ${e.message}`);
      throw e;
    }
    checkTtl(metadata, 'metadata');
    let result;
    try {
      result = await this.outbound(ref, () => store.query(parsed, ref.prefix, metadata ?? {}));
    } catch (e) {
      if (e instanceof StateRequestError) throw fail(ERRORS.STATE_QUERY_INVALID, `failed ${VERB.ERR_STATE_QUERY} state store ${ref.name}: ${errorMessage(e)}`);
      throw storeFailure(e, 'ERR_STATE_QUERY', ref.name);
    }
    // a pluggable store answers with the keys it holds: one outside this prefix is shown whole
    const unprefixed = (key: string) => (key.startsWith(ref.prefix) ? key.slice(ref.prefix.length) : key);
    return { results: result.results.map((r) => ({ ...r, key: unprefixed(r.key) })), token: result.token, metadata: result.metadata };
  }

  /** The store call's result, or what it threw as the error table's row for `code`. */
  private async guarded<T>(ref: StoreRef, code: StateErrorCode, call: () => Promise<T>): Promise<T> {
    try {
      return await this.outbound(ref, call, code);
    } catch (e) {
      throw storeFailure(e, code, ref.name);
    }
  }

  /**
   * A store call under the store's outbound policy. A request the store refused (an etag, a bad
   * query) is the caller's mistake: not retried, not held against the store's circuit.
   */
  private outbound<T>(ref: StoreRef, call: () => Promise<T>, code: StateErrorCode = 'ERR_STATE_QUERY'): Promise<T> {
    if (!this.resiliency) return call();
    // tracing on: a CLIENT span per store call (tracing/components.ts), named by the operation
    if (this.resiliency.tracing) return this.resiliency.tracing.componentCall(ref.name, ref.type, code.slice(10).toLowerCase(), () => this.run(ref, call));
    return this.run(ref, call);
  }

  private run<T>(ref: StoreRef, call: () => Promise<T>): Promise<T> {
    const resiliency = this.resiliency!;
    return resiliency.run(resiliency.forComponent(ref.name, ref.type, 'Outbound'), call, STORE_CALL as RunOptions<T>);
  }
}

/** A store call's run options, one object for all calls: an etag or request error is the caller's, not retried. */
const STORE_CALL: RunOptions<unknown> = Object.freeze({ isRequestError: (e: unknown) => e instanceof ApiError || e instanceof EtagMismatchError || e instanceof EtagInvalidError || e instanceof StateRequestError });


/** The store's request: key checked and prefixed, an empty etag none, metadata's ttlInSeconds checked. */
function setRequest(ref: StoreRef, item: StateSetRequest | null | undefined, where: string): StateSetRequest {
  if (!item) throw malformed(`${where} is missing`);
  const req: StateSetRequest = { key: ref.prefix + checkKeyAt(item.key, where), value: item.value };
  if (item.etag !== undefined && item.etag !== '') req.etag = item.etag;
  if (item.metadata) {
    checkTtl(item.metadata, where);
    req.metadata = item.metadata;
  }
  if (item.options) req.options = item.options;
  return req;
}

function deleteRequest(ref: StoreRef, item: StateDeleteRequest | null | undefined, where: string): StateDeleteRequest {
  const { value: _value, ...rest } = setRequest(ref, item && { ...item, value: NO_VALUE }, where);
  return rest;
}

const NO_VALUE = new Uint8Array(0);

/** A 400 naming the limit when a bulk request holds more than MAX_BULK_ITEMS entries. */
function checkBulkSize(n: number, what: string): void {
  if (n > MAX_BULK_ITEMS) throw malformed(`${what} holds ${n} entries; the limit is ${MAX_BULK_ITEMS} per request: split it into several requests`);
}

/** A key checked by checkKey(), the failure naming where in the request it was. */
function checkKeyAt(key: unknown, where: string): string {
  try {
    return checkKey(key);
  } catch (e) {
    if (e instanceof ApiError) throw malformed(`${where}.key: ${e.message}`);
    throw e;
  }
}

/** Rejects a bad ttlInSeconds before any store sees it (pluggable stores included). */
function checkTtl(md: Record<string, string> | undefined, where: string): void {
  try {
    ttlSeconds(md);
  } catch (e) {
    if (e instanceof StateRequestError) throw malformed(`${where}: ${e.message}`);
    throw e;
  }
}

/**
 * Maps what a store threw: etag mismatch → 409, invalid etag or request → 400, anything else
 * → 500 with the store's message (never a crash).
 */
export function storeFailure(err: unknown, code: StateErrorCode, store: string): ApiError {
  if (err instanceof ApiError) return err;
  const why = errorMessage(err);
  if (err instanceof EtagMismatchError) return failAs(ERRORS.STATE_ETAG_MISMATCH, code, `failed ${VERB[code]} state store ${store}: ${why}`);
  if (err instanceof EtagInvalidError) return failAs(ERRORS.STATE_ETAG_INVALID, code, `failed ${VERB[code]} state store ${store}: ${why}`);
  if (err instanceof StateRequestError) return malformed(`state store ${store}: ${why}`);
  return failAs(ERRORS.STATE_STORE_FAILED, code, `failed ${VERB[code]} state store ${store}: ${why}`);
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
