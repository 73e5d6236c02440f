/**
 * Parsing and checking of state API request bodies and query strings into store requests.
 * Everything a caller can get wrong becomes a 400 ERR_MALFORMED_REQUEST naming the field.
 */
import { ttlSeconds } from '../components/state/common.ts';
import { StateRequestError } from '../components/state/errors.ts';
import type { StateOptions } from '../components/types.ts';
import { parseJsonText } from '../http/body.ts';
import { ApiError, malformed } from '../http/errors.ts';
import { checkKey } from './keys.ts';

/** A save/delete as the caller sent it: key not yet prefixed, value already bytes. */
export interface ItemRequest {
  key: string;
  value: Buffer;
  etag?: string;
  metadata?: Record<string, string>;
  options?: StateOptions;
}

export interface TransactionRequest {
  operations: { operation: 'upsert' | 'delete'; request: ItemRequest }[];
  metadata?: Record<string, string>;
}

export interface BulkGetRequest {
  keys: string[];
  metadata?: Record<string, string>;
}

const NULL_JSON = Buffer.from('null');

/**
 * Most keys, items or operations in one bulk get, save or transaction. Each store call of a
 * request runs in one piece (an embedded store on the event loop): an unbounded one stalled the
 * whole sidecar for minutes. Larger sets go in several requests.
 */
export const MAX_BULK_ITEMS = 10_000;

/** A 400 naming the limit when a bulk request holds more than MAX_BULK_ITEMS entries. */
export function checkBulkSize(n: number, what: string): void {
  if (n > MAX_BULK_ITEMS) throw malformed(`${what} holds ${n} entries; the limit is ${MAX_BULK_ITEMS} per request: split it into several requests`);
}

/** The body as a JSON value: fastify parsed JSON already; other content types arrive as text or bytes. */
export function jsonBody(body: unknown): unknown {
  if (body === undefined || body === null) throw malformed('request body is empty: send JSON');
  if (Buffer.isBuffer(body) || typeof body === 'string') {
    const text = body.toString();
    if (text.trim() === '') throw malformed('request body is empty: send JSON');
    return parseJsonText(text);
  }
  return body;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `metadata`: an object of string values (absent = none). */
export function parseMetadata(v: unknown, where: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw malformed(`${where}.metadata must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') throw malformed(`${where}.metadata.${k} must be a string`);
    out[k] = val;
  }
  checkTtl(out, where);
  return out;
}

/** Rejects a bad ttlInSeconds before any store sees it (pluggable stores included). */
export function checkTtl(md: Record<string, string> | undefined, where: string): void {
  try {
    ttlSeconds(md);
  } catch (e) {
    if (e instanceof StateRequestError) throw malformed(`${where}: ${e.message}`);
    throw e;
  }
}

export function parseOptions(v: unknown, where: string): StateOptions | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw malformed(`${where}.options must be an object`);
  return optionsOf(v.concurrency, v.consistency, `${where}.options`);
}

/** Concurrency and consistency, from a body's options or from query parameters. */
export function optionsOf(concurrency: unknown, consistency: unknown, where: string): StateOptions | undefined {
  const out: StateOptions = {};
  if (concurrency !== undefined && concurrency !== null && concurrency !== '') {
    if (concurrency !== 'first-write' && concurrency !== 'last-write') throw malformed(`${where}.concurrency must be "first-write" or "last-write"`);
    out.concurrency = concurrency;
  }
  if (consistency !== undefined && consistency !== null && consistency !== '') {
    if (consistency !== 'eventual' && consistency !== 'strong') throw malformed(`${where}.consistency must be "eventual" or "strong"`);
    out.consistency = consistency;
  }
  return out.concurrency || out.consistency ? out : undefined;
}

function parseEtag(v: unknown, where: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw malformed(`${where}.etag must be a string`);
  return v;
}

/** One item of a save or a transaction's request object. */
function parseItem(v: unknown, where: string, withValue: boolean): ItemRequest {
  if (!isObject(v)) throw malformed(`${where} must be an object with a key`);
  const item: ItemRequest = {
    key: checkKeyAt(v.key, where),
    // a JSON value is stored as its JSON text; no value is stored as JSON null
    value: withValue && v.value !== undefined ? Buffer.from(JSON.stringify(v.value)) : NULL_JSON,
  };
  const etag = parseEtag(v.etag, where);
  if (etag !== undefined) item.etag = etag;
  const md = parseMetadata(v.metadata, where);
  if (md) item.metadata = md;
  const options = parseOptions(v.options, where);
  if (options) item.options = options;
  return item;
}

/** A key checked by checkKey(), the failure naming where in the request it was. */
export function checkKeyAt(key: unknown, where: string): string {
  try {
    return checkKey(key);
  } catch (e) {
    if (e instanceof ApiError) throw malformed(`${where}.key: ${e.message}`);
    throw e;
  }
}

/** POST /v1.0/state/<store>: a JSON array of items. */
export function parseSaveBody(body: unknown): ItemRequest[] {
  const v = jsonBody(body);
  if (!Array.isArray(v)) throw malformed('request body must be a JSON array of {key, value, etag?, metadata?, options?}');
  checkBulkSize(v.length, 'the save request');
  return v.map((x, i) => parseItem(x, `[${i}]`, true));
}

/** POST /v1.0/state/<store>/bulk: {keys, parallelism?, metadata?}. */
export function parseBulkGetBody(body: unknown): BulkGetRequest {
  const v = jsonBody(body);
  if (!isObject(v)) throw malformed('request body must be {"keys": [...], "parallelism": n}');
  if (!Array.isArray(v.keys)) throw malformed('keys must be an array of strings');
  checkBulkSize(v.keys.length, 'keys');
  const keys = v.keys.map((k, i) => checkKeyAt(k, `keys[${i}]`));
  if (v.parallelism !== undefined && v.parallelism !== null && (typeof v.parallelism !== 'number' || !Number.isInteger(v.parallelism) || v.parallelism < 0)) {
    throw malformed('parallelism must be a non-negative integer');
  }
  const out: BulkGetRequest = { keys };
  const md = parseMetadata(v.metadata, 'body');
  if (md) out.metadata = md;
  return out;
}

/** POST /v1.0/state/<store>/transaction: {operations: [{operation, request}], metadata?}. */
export function parseTransactionBody(body: unknown): TransactionRequest {
  const v = jsonBody(body);
  if (!isObject(v)) throw malformed('request body must be {"operations": [{"operation": "upsert"|"delete", "request": {...}}], "metadata": {...}}');
  if (!Array.isArray(v.operations)) throw malformed('operations must be an array');
  checkBulkSize(v.operations.length, 'operations');
  const operations = v.operations.map((op, i) => {
    const where = `operations[${i}]`;
    if (!isObject(op)) throw malformed(`${where} must be an object`);
    if (op.operation !== 'upsert' && op.operation !== 'delete') {
      throw new ApiError(400, 'ERR_NOT_SUPPORTED_STATE_OPERATION', `${where}.operation "${String(op.operation).slice(0, 40)}" is not supported: use "upsert" or "delete"`);
    }
    const operation: 'upsert' | 'delete' = op.operation;
    return { operation, request: parseItem(op.request, `${where}.request`, operation === 'upsert') };
  });
  const out: TransactionRequest = { operations };
  const md = parseMetadata(v.metadata, 'body');
  if (md) out.metadata = md;
  return out;
}

/** `metadata.<name>=value` query parameters (repeated names: the last one counts). */
export function queryMetadata(query: unknown): Record<string, string> | undefined {
  if (!isObject(query)) return undefined;
  let out: Record<string, string> | undefined;
  for (const [k, v] of Object.entries(query)) {
    if (!k.startsWith('metadata.')) continue;
    out ??= {};
    out[k.slice(9)] = Array.isArray(v) ? String(v[v.length - 1]) : String(v);
  }
  checkTtl(out, 'query');
  return out;
}

/** A query parameter that must occur once at most. */
export function queryParam(query: unknown, name: string): string | undefined {
  if (!isObject(query)) return undefined;
  const v = query[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) throw malformed(`query parameter ${name} is given more than once`);
  return String(v);
}
