/**
 * The state building block between the API surfaces (HTTP now, gRPC later) and the stores:
 * finds a store by name, prefixes keys, and turns store errors into API errors.
 */
import { EtagInvalidError, EtagMismatchError, StateRequestError } from '../components/state/errors.ts';
import { isQueryable, parseQuery, type QueryHit } from '../components/state/query.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { StateStore } from '../components/types.ts';
import { ApiError, badRequest, errorMessage, malformed } from '../http/errors.ts';
import { keyPrefixFor } from './keys.ts';
import { jsonBody } from './requests.ts';

export interface StoreRef {
  name: string;
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

  constructor(components: ComponentRegistry, appId: string, namespace: string) {
    this.components = components;
    this.appId = appId;
    this.namespace = namespace;
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
      throw badRequest('ERR_STATE_STORE_NOT_FOUND', `state store "${clip(name)}" is not found (${known})`, [{ loaded: names }]);
    }
    let prefix: string;
    try {
      prefix = keyPrefixFor(loaded.spec.metadata.keyPrefix, name, this.appId, this.namespace);
    } catch (e) {
      throw new ApiError(500, 'ERR_STATE_STORE_NOT_CONFIGURED', errorMessage(e));
    }
    const ref = { name, store, prefix };
    this.cache.set(name, ref);
    return ref;
  }

  /** A transactional store, or a 400 saying this one is not. */
  transactional(name: string): StoreRef & { store: Required<Pick<StateStore, 'transact'>> & StateStore } {
    const ref = this.store(name);
    if (typeof ref.store.transact !== 'function' || !ref.store.features().includes('TRANSACTIONAL')) {
      throw badRequest('ERR_STATE_STORE_NOT_SUPPORTED', `state store "${name}" does not support transactions`);
    }
    return ref as StoreRef & { store: Required<Pick<StateStore, 'transact'>> & StateStore };
  }

  /**
   * The query API (alpha) for both surfaces: `body` is the query as JSON text, bytes or an
   * already-parsed value; `metadata` goes to the store (e.g. a partition key). Result keys come
   * back without the store's key prefix. Whatever the store throws is ERR_STATE_QUERY: 400 when
   * it refused the query as invalid, 500 otherwise.
   */
  async query(name: string, body: unknown, metadata?: Record<string, string>): Promise<{ results: QueryHit[]; token?: string; metadata?: Record<string, string> }> {
    const ref = this.store(name);
    const store = ref.store;
    if (!isQueryable(store)) throw badRequest('ERR_STATE_STORE_NOT_SUPPORTED', `state store "${ref.name}" does not support the query API`);
    let query;
    try {
      query = parseQuery(jsonBody(body), { opaqueToken: store.opaqueQueryTokens === true });
    } catch (e) {
      if (e instanceof StateRequestError) throw malformed(`query: ${e.message}`);
      throw e;
    }
    let result;
    try {
      result = await store.query(query, ref.prefix, metadata ?? {});
    } catch (e) {
      if (e instanceof StateRequestError) throw new ApiError(400, 'ERR_STATE_QUERY', `failed ${VERB.ERR_STATE_QUERY} state store ${ref.name}: ${errorMessage(e)}`);
      throw storeFailure(e, 'ERR_STATE_QUERY', ref.name);
    }
    // a pluggable store answers with the keys it holds: one outside this prefix is shown whole
    const unprefixed = (key: string) => (key.startsWith(ref.prefix) ? key.slice(ref.prefix.length) : key);
    return { results: result.results.map((r) => ({ ...r, key: unprefixed(r.key) })), token: result.token, metadata: result.metadata };
  }
}

/**
 * Maps what a store threw: etag mismatch → 409, invalid etag or request → 400, anything else
 * → 500 with the store's message (never a crash).
 */
export function storeFailure(err: unknown, code: StateErrorCode, store: string): ApiError {
  if (err instanceof ApiError) return err;
  const why = errorMessage(err);
  if (err instanceof EtagMismatchError) return new ApiError(409, code, `failed ${VERB[code]} state store ${store}: ${why}`);
  if (err instanceof EtagInvalidError) return new ApiError(400, code, `failed ${VERB[code]} state store ${store}: ${why}`);
  if (err instanceof StateRequestError) return malformed(`state store ${store}: ${why}`);
  return new ApiError(500, code, `failed ${VERB[code]} state store ${store}: ${why}`);
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
