/**
 * State methods of the runtime API. Store lookup, key prefixing, key checks, TTL checks and
 * the mapping of store errors (etag mismatch → 409 → ABORTED, invalid etag → 400 →
 * INVALID_ARGUMENT) are the state block's own (state/service.ts, keys.ts, requests.ts).
 */
import type { StateDeleteRequest, StateItem, StateOptions, StateSetRequest, StateTransactionOperation } from '../../components/types.ts';
import { ApiError, malformed } from '../../http/errors.ts';
import { checkBulkSize, checkKeyAt, checkTtl } from '../../state/requests.ts';
import { storeFailure, type StateService, type StoreRef } from '../../state/service.ts';
import { bytesOf, metadataOf } from './handler.ts';

// ---------------------------------------------------------------- wire shapes (keepCase)

export interface EtagMsg {
  value: string;
}
export interface StateOptionsMsg {
  concurrency: number;
  consistency: number;
}
export interface StateItemMsg {
  key: string;
  value: Buffer;
  etag: EtagMsg | null;
  metadata: Record<string, string>;
  options: StateOptionsMsg | null;
}
export interface GetStateRequest {
  store_name: string;
  key: string;
  consistency: number;
  metadata: Record<string, string>;
}
export interface GetStateResponse {
  data: Buffer;
  etag: string;
  metadata: Record<string, string>;
}
export interface GetBulkStateRequest {
  store_name: string;
  keys: string[];
  parallelism: number;
  metadata: Record<string, string>;
}
export interface BulkStateItem {
  key: string;
  data: Buffer;
  etag: string;
  error: string;
  metadata: Record<string, string>;
}
export interface SaveStateRequest {
  store_name: string;
  states: StateItemMsg[];
}
export interface DeleteStateRequest {
  store_name: string;
  key: string;
  etag: EtagMsg | null;
  options: StateOptionsMsg | null;
  metadata: Record<string, string>;
}
export interface ExecuteStateTransactionRequest {
  storeName: string;
  operations: { operationType: string; request: StateItemMsg | null }[];
  metadata: Record<string, string>;
}

export interface QueryStateRequest {
  store_name: string;
  query: string;
  metadata: Record<string, string>;
}
export interface QueryStateResponse {
  results: { key: string; data: Buffer; etag: string; error: string }[];
  token: string;
  metadata: Record<string, string>;
}

// ---------------------------------------------------------------- mapping

const CONCURRENCY: Record<number, StateOptions['concurrency'] | undefined> = { 0: undefined, 1: 'first-write', 2: 'last-write' };
const CONSISTENCY: Record<number, StateOptions['consistency'] | undefined> = { 0: undefined, 1: 'eventual', 2: 'strong' };

function consistencyOf(n: number | null | undefined, where: string): StateOptions['consistency'] {
  const v = n ?? 0;
  if (!(v in CONSISTENCY)) throw malformed(`${where}.consistency ${v} is not a StateConsistency value (0, 1 eventual, 2 strong)`);
  return CONSISTENCY[v];
}

function optionsOf(o: StateOptionsMsg | null | undefined, where: string): StateOptions | undefined {
  if (!o) return undefined;
  const c = o.concurrency ?? 0;
  if (!(c in CONCURRENCY)) throw malformed(`${where}.options.concurrency ${c} is not a StateConcurrency value (0, 1 first-write, 2 last-write)`);
  const out: StateOptions = {};
  const concurrency = CONCURRENCY[c];
  const consistency = consistencyOf(o.consistency, `${where}.options`);
  if (concurrency) out.concurrency = concurrency;
  if (consistency) out.consistency = consistency;
  return out.concurrency || out.consistency ? out : undefined;
}

function metadataAt(m: Record<string, string> | null | undefined, where: string): Record<string, string> | undefined {
  const md = metadataOf(m);
  checkTtl(md, where);
  return md;
}

/** An empty etag is "no etag", as in the HTTP API. */
function etagOf(e: EtagMsg | null | undefined): string | undefined {
  return e && e.value !== '' ? e.value : undefined;
}

function setRequest(ref: StoreRef, item: StateItemMsg | null | undefined, where: string): StateSetRequest {
  if (!item) throw malformed(`${where} is missing`);
  const req: StateSetRequest = { key: ref.prefix + checkKeyAt(item.key, where), value: bytesOf(item.value) };
  const etag = etagOf(item.etag);
  if (etag !== undefined) req.etag = etag;
  const md = metadataAt(item.metadata, where);
  if (md) req.metadata = md;
  const options = optionsOf(item.options, where);
  if (options) req.options = options;
  return req;
}

function deleteRequest(ref: StoreRef, item: StateItemMsg | null | undefined, where: string): StateDeleteRequest {
  const { value: _value, ...rest } = setRequest(ref, item, where);
  return rest;
}

function itemMetadata(item: StateItem | undefined): Record<string, string> {
  return item?.metadata ? { ...item.metadata } : {};
}

// ---------------------------------------------------------------- methods

export function stateMethods(state: StateService) {
  return {
    async GetState(req: GetStateRequest): Promise<GetStateResponse> {
      const ref = state.store(req.store_name);
      const key = ref.prefix + checkKeyAt(req.key, 'request');
      consistencyOf(req.consistency, 'request');
      let item: StateItem | undefined;
      try {
        item = await ref.store.get(key, metadataOf(req.metadata));
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_GET', ref.name);
      }
      // absent: empty data and etag, as the ecosystem's API answers
      return { data: item ? bytesOf(item.value) : Buffer.alloc(0), etag: item?.etag ?? '', metadata: itemMetadata(item) };
    },

    async GetBulkState(req: GetBulkStateRequest): Promise<{ items: BulkStateItem[] }> {
      const ref = state.store(req.store_name);
      checkBulkSize(req.keys?.length ?? 0, 'keys');
      const keys = (req.keys ?? []).map((k, i) => checkKeyAt(k, `keys[${i}]`));
      if (keys.length === 0) return { items: [] };
      let items: (StateItem | undefined)[];
      try {
        items = await ref.store.bulkGet(
          keys.map((k) => ref.prefix + k),
          metadataOf(req.metadata),
        );
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_BULK_GET', ref.name);
      }
      return {
        items: keys.map((k, i) => {
          const it = items[i];
          return { key: k, data: it ? bytesOf(it.value) : Buffer.alloc(0), etag: it?.etag ?? '', error: '', metadata: itemMetadata(it) };
        }),
      };
    },

    async SaveState(req: SaveStateRequest): Promise<Record<string, never>> {
      const ref = state.store(req.store_name);
      checkBulkSize(req.states?.length ?? 0, 'states');
      const reqs = (req.states ?? []).map((s, i) => setRequest(ref, s, `states[${i}]`));
      if (reqs.length === 0) return {};
      try {
        if (reqs.length === 1) await ref.store.set(reqs[0]);
        else await ref.store.bulkSet(reqs);
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_SAVE', ref.name);
      }
      return {};
    },

    async DeleteState(req: DeleteStateRequest): Promise<Record<string, never>> {
      const ref = state.store(req.store_name);
      const del: StateDeleteRequest = { key: ref.prefix + checkKeyAt(req.key, 'request') };
      const etag = etagOf(req.etag);
      if (etag !== undefined) del.etag = etag;
      const md = metadataAt(req.metadata, 'request');
      if (md) del.metadata = md;
      const options = optionsOf(req.options, 'request');
      if (options) del.options = options;
      try {
        await ref.store.delete(del);
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_DELETE', ref.name);
      }
      return {};
    },

    async DeleteBulkState(req: SaveStateRequest): Promise<Record<string, never>> {
      const ref = state.store(req.store_name);
      checkBulkSize(req.states?.length ?? 0, 'states');
      const dels = (req.states ?? []).map((s, i) => deleteRequest(ref, s, `states[${i}]`));
      if (dels.length === 0) return {};
      try {
        await ref.store.bulkDelete(dels);
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_DELETE', ref.name);
      }
      return {};
    },

    async ExecuteStateTransaction(req: ExecuteStateTransactionRequest): Promise<Record<string, never>> {
      const ref = state.transactional(req.storeName);
      checkBulkSize(req.operations?.length ?? 0, 'operations');
      const ops: StateTransactionOperation[] = (req.operations ?? []).map((op, i) => {
        const where = `operations[${i}]`;
        if (op.operationType === 'upsert') return { operation: 'upsert', request: setRequest(ref, op.request, `${where}.request`) };
        if (op.operationType === 'delete') return { operation: 'delete', request: deleteRequest(ref, op.request, `${where}.request`) };
        throw new ApiError(400, 'ERR_NOT_SUPPORTED_STATE_OPERATION', `${where}.operationType "${String(op.operationType).slice(0, 40)}" is not supported: use "upsert" or "delete"`);
      });
      const md = metadataAt(req.metadata, 'request');
      if (ops.length === 0) return {};
      try {
        await ref.store.transact(ops, md);
      } catch (e) {
        throw storeFailure(e, 'ERR_STATE_TRANSACTION', ref.name);
      }
      return {};
    },

    /** The HTTP API's query (alpha): same language, same checks, same store call. */
    async QueryStateAlpha1(req: QueryStateRequest): Promise<QueryStateResponse> {
      const result = await state.query(req.store_name, req.query, metadataOf(req.metadata));
      return {
        results: result.results.map((r) => ({ key: r.key, data: bytesOf(r.value), etag: r.etag ?? '', error: r.error ?? '' })),
        token: result.token ?? '',
        metadata: result.metadata ?? {},
      };
    },
  };
}
