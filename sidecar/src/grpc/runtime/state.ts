/**
 * State methods of the runtime API: each decodes its message, calls the operation of the state
 * block's service (state/service.ts, shared with the HTTP API: store lookup, key prefixing, key,
 * size and TTL checks, the error table's rows) and encodes the answer.
 */
import type { StateDeleteRequest, StateItem, StateOptions, StateSetRequest } from '../../components/types.ts';
import { malformed } from '../../http/errors.ts';
import { jsonBody } from '../../state/requests.ts';
import type { StateService, TransactionRequestOperation } from '../../state/service.ts';
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

/** An empty etag is "no etag", as in the HTTP API. */
function etagOf(e: EtagMsg | null | undefined): string | undefined {
  return e && e.value !== '' ? e.value : undefined;
}

function setRequest(item: StateItemMsg | null | undefined, where: string): StateSetRequest | undefined {
  if (!item) return undefined;
  const req: StateSetRequest = { key: item.key ?? '', value: bytesOf(item.value) };
  const etag = etagOf(item.etag);
  if (etag !== undefined) req.etag = etag;
  const md = metadataOf(item.metadata);
  if (md) req.metadata = md;
  const options = optionsOf(item.options, where);
  if (options) req.options = options;
  return req;
}

function deleteRequest(item: StateItemMsg | null | undefined, where: string): StateDeleteRequest | undefined {
  const req = setRequest(item, where);
  if (!req) return undefined;
  const { value: _value, ...rest } = req;
  return rest;
}

/** A list of items, where the service names a missing one. */
function items<T>(list: (StateItemMsg | null)[] | null | undefined, decode: (item: StateItemMsg | null | undefined, where: string) => T | undefined): T[] {
  return (list ?? []).map((item, i) => decode(item, `states[${i}]`) as T);
}

function itemMetadata(item: StateItem | undefined): Record<string, string> {
  return item?.metadata ? { ...item.metadata } : {};
}

// ---------------------------------------------------------------- methods

export function stateMethods(state: StateService) {
  return {
    async GetState(req: GetStateRequest): Promise<GetStateResponse> {
      consistencyOf(req.consistency, 'request');
      const item = await state.get(req.store_name, req.key ?? '', metadataOf(req.metadata));
      // absent: empty data and etag, as the ecosystem's API answers
      return { data: item ? bytesOf(item.value) : Buffer.alloc(0), etag: item?.etag ?? '', metadata: itemMetadata(item) };
    },

    async GetBulkState(req: GetBulkStateRequest): Promise<{ items: BulkStateItem[] }> {
      const keys = req.keys ?? [];
      const got = await state.bulkGet(req.store_name, keys, metadataOf(req.metadata));
      return {
        items: got.map((it, i) => ({ key: keys[i], data: it ? bytesOf(it.value) : Buffer.alloc(0), etag: it?.etag ?? '', error: '', metadata: itemMetadata(it) })),
      };
    },

    async SaveState(req: SaveStateRequest): Promise<Record<string, never>> {
      await state.save(req.store_name, items(req.states, setRequest));
      return {};
    },

    async DeleteState(req: DeleteStateRequest): Promise<Record<string, never>> {
      const del: StateDeleteRequest = { key: req.key ?? '' };
      const etag = etagOf(req.etag);
      if (etag !== undefined) del.etag = etag;
      const md = metadataOf(req.metadata);
      if (md) del.metadata = md;
      const options = optionsOf(req.options, 'request');
      if (options) del.options = options;
      await state.delete(req.store_name, del);
      return {};
    },

    async DeleteBulkState(req: SaveStateRequest): Promise<Record<string, never>> {
      await state.bulkDelete(req.store_name, items(req.states, deleteRequest));
      return {};
    },

    async ExecuteStateTransaction(req: ExecuteStateTransactionRequest): Promise<Record<string, never>> {
      const operations = (req.operations ?? []).map((op, i): TransactionRequestOperation => {
        const where = `operations[${i}].request`;
        return { operation: op.operationType, request: op.operationType === 'delete' ? deleteRequest(op.request, where) : setRequest(op.request, where) };
      });
      await state.transact(req.storeName, operations, metadataOf(req.metadata));
      return {};
    },

    /** The HTTP API's query (alpha): same language, same checks, same store call. */
    async QueryStateAlpha1(req: QueryStateRequest): Promise<QueryStateResponse> {
      const result = await state.query(req.store_name, jsonBody(req.query), metadataOf(req.metadata));
      return {
        results: result.results.map((r) => ({ key: r.key, data: bytesOf(r.value), etag: r.etag ?? '', error: r.error ?? '' })),
        token: result.token ?? '',
        metadata: result.metadata ?? {},
      };
    },
  };
}
