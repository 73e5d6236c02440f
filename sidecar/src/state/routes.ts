/**
 * The state HTTP API, as users of the ecosystem's state API call it:
 *   POST   /v1.0/state/<store>               save items        → 204
 *   GET    /v1.0/state/<store>/<key>         one value         → 200 + ETag | 204 when absent
 *   DELETE /v1.0/state/<store>/<key>         delete (If-Match) → 204
 *   POST   /v1.0/state/<store>/bulk          bulk get          → 200 [{key, data, etag}]
 *   POST   /v1.0/state/<store>/transaction   all-or-nothing    → 204
 *   POST   /v1.0-alpha1/state/<store>/query  query (stores with QUERY_API) → 200 {results, token?}
 * Each route declares its schema (schemas.ts), decodes (requests.ts), calls the operation of the
 * state service (service.ts, shared with the gRPC API) and encodes its answer; the service
 * checks what the values mean and maps errors.
 */
import type { SidecarContext } from '../context.ts';
import type { StateItem } from '../components/types.ts';
import { queryMetadata } from '../http/query.ts';
import { jsonOfAnyContentType } from '../http/schema.ts';
import { deleteRequestOf, saveItems, transactionOf, type ItemJson } from './requests.ts';
import * as schemas from './schemas.ts';
import type { StateService } from './service.ts';

const HEADER_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const HEADER_VALUE = /^[\x20-\x7e]{0,4096}$/;

type Query = Record<string, string | string[]>;
type Store = { Params: { storename: string }; Querystring: Query };
type Key = { Params: { storename: string; key: string }; Querystring: Query & { concurrency?: string; consistency?: string } };

export function stateRoutes(ctx: SidecarContext, state: StateService): void {
  const http = ctx.http;
  // JSON bodies are read whatever their Content-Type (none, text/plain …), then checked by their schema
  const json = { preValidation: jsonOfAnyContentType };

  http.post<Store & { Body: ItemJson[] }>('/v1.0/state/:storename', { schema: schemas.SAVE, ...json }, async (req, reply) => {
    const items = saveItems(req.body);
    // request-wide `metadata.*` query parameters are copied over every item's own metadata
    // (the reference runtime's precedence: the request's wins)
    const md = queryMetadata(req.query);
    if (md) for (const i of items) i.metadata = mergeMetadata(i.metadata, md);
    await state.save(req.params.storename, items);
    return reply.code(204).send();
  });

  http.get<Key>('/v1.0/state/:storename/:key', { schema: schemas.GET }, async (req, reply) => {
    const item = await state.get(req.params.storename, req.params.key, queryMetadata(req.query));
    if (!item) return reply.code(204).send();
    if (item.etag !== undefined && HEADER_VALUE.test(item.etag)) reply.header('etag', item.etag);
    // response metadata (e.g. ttlExpireTime) as headers; a pluggable store's odd names are left out
    if (item.metadata) for (const [k, v] of Object.entries(item.metadata)) if (HEADER_NAME.test(k) && HEADER_VALUE.test(v)) reply.header(`metadata.${k}`, v);
    reply.header('content-type', 'application/json');
    return reply.send(Buffer.isBuffer(item.value) ? item.value : Buffer.from(item.value));
  });

  http.delete<Key>('/v1.0/state/:storename/:key', { schema: schemas.DELETE }, async (req, reply) => {
    await state.delete(req.params.storename, deleteRequestOf(req.params.key, req.headers['if-match'], req.query));
    return reply.code(204).send();
  });

  http.post<Store & { Body: { keys: string[]; metadata?: Record<string, string> | null } }>('/v1.0/state/:storename/bulk', { schema: schemas.BULK_GET, ...json }, async (req, reply) => {
    const { keys, metadata } = req.body;
    const items = await state.bulkGet(req.params.storename, keys, mergeMetadata(metadata ?? undefined, queryMetadata(req.query)));
    reply.header('content-type', 'application/json');
    return reply.send(bulkJson(keys, items));
  });

  type TxBody = Parameters<typeof transactionOf>[0];
  http.post<Store & { Body: TxBody }>('/v1.0/state/:storename/transaction', { schema: schemas.TRANSACTION, ...json }, async (req, reply) => {
    const tx = transactionOf(req.body);
    // `metadata.*` query parameters win over the body's and every operation's metadata
    const query = queryMetadata(req.query);
    const operations = query ? tx.operations.map((op) => (op.request ? { ...op, request: { ...op.request, metadata: mergeMetadata(op.request.metadata, query) } } : op)) : tx.operations;
    await state.transact(req.params.storename, operations, mergeMetadata(tx.metadata, query));
    return reply.code(204).send();
  });

  http.post<Store>('/v1.0-alpha1/state/:storename/query', { schema: schemas.QUERY, ...json }, async (req, reply) => {
    // `metadata.*` query parameters go to the store (e.g. a partition key)
    const result = await state.query(req.params.storename, req.body, queryMetadata(req.query));
    const items = result.results.map((r) => {
      const s = itemJson(r.key, { key: r.key, value: r.value, etag: r.etag });
      return r.error ? `${s.slice(0, -1)},"error":${JSON.stringify(r.error)}}` : s;
    });
    const md = result.metadata && Object.keys(result.metadata).length > 0 ? `,"metadata":${JSON.stringify(result.metadata)}` : '';
    reply.header('content-type', 'application/json');
    return reply.send(`{"results":[${items.join(',')}]${result.token ? `,"token":${JSON.stringify(result.token)}` : ''}${md}}`);
  });
}

function mergeMetadata(a: Record<string, string> | undefined, b: Record<string, string> | undefined): Record<string, string> | undefined {
  return a && b ? { ...a, ...b } : (a ?? b);
}

/**
 * The bulk answer, written by hand so that stored JSON is embedded as is (no parse and
 * re-serialise of every value). Values that are not JSON are sent as base64 strings.
 */
function bulkJson(keys: string[], items: (StateItem | undefined)[]): string {
  const parts: string[] = [];
  for (let i = 0; i < keys.length; i++) parts.push(itemJson(keys[i], items[i]));
  return `[${parts.join(',')}]`;
}

/** `{key, data?, etag?, metadata?}` with the key as the caller knows it (no prefix). */
function itemJson(key: string, item: StateItem | undefined): string {
  let s = `{"key":${JSON.stringify(key)}`;
  if (item) {
    const buf = Buffer.isBuffer(item.value) ? item.value : Buffer.from(item.value);
    const text = buf.toString('utf8');
    s += `,"data":${isJson(text) ? text : JSON.stringify(buf.toString('base64'))}`;
    if (item.etag !== undefined) s += `,"etag":${JSON.stringify(item.etag)}`;
    if (item.metadata) s += `,"metadata":${JSON.stringify(item.metadata)}`;
  }
  return `${s}}`;
}

function isJson(text: string): boolean {
  if (text.length === 0) return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

