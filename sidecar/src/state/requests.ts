/**
 * Decoding of the state HTTP API's requests, once their schemas (schemas.ts) have checked their
 * shapes, into the state service's request shapes (service.ts): a JSON value becomes its JSON
 * text, an empty etag or option none, `metadata.*` query parameters the request's metadata.
 */
import type { StateDeleteRequest, StateOptions, StateSetRequest } from '../components/types.ts';
import { parseJsonText } from '../http/body.ts';
import { malformed } from '../http/errors.ts';
import { queryMetadata } from '../http/query.ts';
import type { TransactionRequestOperation } from './service.ts';

/** An item as its schema lets it through. */
export interface ItemJson {
  key: string;
  value?: unknown;
  etag?: string | null;
  metadata?: Record<string, string> | null;
  options?: { concurrency?: string | null; consistency?: string | null } | null;
}

export interface TransactionRequest {
  operations: TransactionRequestOperation[];
  metadata?: Record<string, string>;
}

const NULL_JSON = Buffer.from('null');

/** A body as JSON text or bytes (the gRPC query, a body of another content type) → its JSON value. */
export function jsonBody(body: unknown): unknown {
  if (body === undefined || body === null) throw malformed('request body is empty: send JSON');
  if (Buffer.isBuffer(body) || typeof body === 'string') {
    const text = body.toString();
    if (text.trim() === '') throw malformed('request body is empty: send JSON');
    return parseJsonText(text);
  }
  return body;
}

/** Concurrency and consistency, from a body's options or from query parameters ('' = not given). */
export function optionsOf(concurrency: unknown, consistency: unknown): StateOptions | undefined {
  const out: StateOptions = {};
  if (concurrency === 'first-write' || concurrency === 'last-write') out.concurrency = concurrency;
  if (consistency === 'eventual' || consistency === 'strong') out.consistency = consistency;
  return out.concurrency || out.consistency ? out : undefined;
}

/** One item of a save or a transaction's request. */
function itemOf(v: ItemJson, withValue: boolean): StateSetRequest {
  // a JSON value is stored as its JSON text; no value is stored as JSON null
  const item: StateSetRequest = { key: v.key, value: withValue && v.value !== undefined ? Buffer.from(JSON.stringify(v.value)) : NULL_JSON };
  if (v.etag) item.etag = v.etag;
  if (v.metadata) item.metadata = { ...v.metadata };
  const options = v.options ? optionsOf(v.options.concurrency, v.options.consistency) : undefined;
  if (options) item.options = options;
  return item;
}

/** POST /v1.0/state/<store>: a JSON array of items. */
export function saveItems(body: ItemJson[]): StateSetRequest[] {
  return body.map((x) => itemOf(x, true));
}

/** POST /v1.0/state/<store>/transaction: {operations: [{operation, request}], metadata?}. */
export function transactionOf(body: { operations: { operation: string; request: ItemJson }[]; metadata?: Record<string, string> | null }): TransactionRequest {
  const operations = body.operations.map(({ operation, request }): TransactionRequestOperation => ({ operation, request: itemOf(request, operation === 'upsert') }));
  return body.metadata ? { operations, metadata: { ...body.metadata } } : { operations };
}

/** DELETE /v1.0/state/<store>/<key>: If-Match, and `concurrency`/`consistency`/`metadata.*` of the query. */
export function deleteRequestOf(key: string, ifMatch: unknown, query: { concurrency?: string; consistency?: string }): StateDeleteRequest {
  const request: StateDeleteRequest = { key };
  if (typeof ifMatch === 'string' && ifMatch !== '') request.etag = ifMatch;
  const metadata = queryMetadata(query);
  if (metadata) request.metadata = metadata;
  const options = optionsOf(query.concurrency, query.consistency);
  if (options) request.options = options;
  return request;
}
