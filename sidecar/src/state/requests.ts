/**
 * Decoding of state API HTTP request bodies and query strings into the state service's request
 * shapes (service.ts). Only shapes are checked here (a member's type, an enum's spelling); what
 * the values mean (keys, sizes, ttlInSeconds, transaction operations) the service checks for
 * both API surfaces. Everything a caller can get wrong is a 400 ERR_MALFORMED_REQUEST naming the
 * member.
 */
import type { StateDeleteRequest, StateOptions, StateSetRequest } from '../components/types.ts';
import { parseJsonText } from '../http/body.ts';
import { malformed } from '../http/errors.ts';
import type { TransactionRequestOperation } from './service.ts';

export interface TransactionRequest {
  operations: TransactionRequestOperation[];
  metadata?: Record<string, string>;
}

export interface BulkGetRequest {
  keys: string[];
  metadata?: Record<string, string>;
}

const NULL_JSON = Buffer.from('null');

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
  return out;
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

function parseKey(v: unknown, where: string): string {
  if (typeof v !== 'string') throw malformed(`${where}.key: state key must be a string`);
  return v;
}

/** One item of a save or a transaction's request object. */
function parseItem(v: unknown, where: string, withValue: boolean): StateSetRequest {
  if (!isObject(v)) throw malformed(`${where} must be an object with a key`);
  const item: StateSetRequest = {
    key: parseKey(v.key, where),
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

/** POST /v1.0/state/<store>: a JSON array of items. */
export function parseSaveBody(body: unknown): StateSetRequest[] {
  const v = jsonBody(body);
  if (!Array.isArray(v)) throw malformed('request body must be a JSON array of {key, value, etag?, metadata?, options?}');
  return v.map((x, i) => parseItem(x, `states[${i}]`, true));
}

/** POST /v1.0/state/<store>/bulk: {keys, parallelism?, metadata?}. */
export function parseBulkGetBody(body: unknown): BulkGetRequest {
  const v = jsonBody(body);
  if (!isObject(v)) throw malformed('request body must be {"keys": [...], "parallelism": n}');
  if (!Array.isArray(v.keys)) throw malformed('keys must be an array of strings');
  const keys = v.keys.map((k, i) => {
    if (typeof k !== 'string') throw malformed(`keys[${i}].key: state key must be a string`);
    return k;
  });
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
  const operations = v.operations.map((op, i): TransactionRequestOperation => {
    const where = `operations[${i}]`;
    if (!isObject(op)) throw malformed(`${where} must be an object`);
    const operation = typeof op.operation === 'string' ? op.operation : String(op.operation);
    // an operation the service does not know keeps its own error (ERR_NOT_SUPPORTED_STATE_OPERATION)
    if (operation !== 'upsert' && operation !== 'delete') return { operation, request: undefined };
    return { operation, request: parseItem(op.request, `${where}.request`, operation === 'upsert') };
  });
  const out: TransactionRequest = { operations };
  const md = parseMetadata(v.metadata, 'body');
  if (md) out.metadata = md;
  return out;
}

/** DELETE /v1.0/state/<store>/<key>: If-Match, `concurrency`/`consistency` and `metadata.*` of the query. */
export function deleteRequestOf(key: string, ifMatch: unknown, query: unknown, metadata: Record<string, string> | undefined): StateDeleteRequest {
  const request: StateDeleteRequest = { key };
  if (typeof ifMatch === 'string' && ifMatch !== '') request.etag = ifMatch;
  if (metadata) request.metadata = metadata;
  const options = optionsOf(queryParam(query, 'concurrency'), queryParam(query, 'consistency'), 'query');
  if (options) request.options = options;
  return request;
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
