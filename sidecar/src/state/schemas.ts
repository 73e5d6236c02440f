/**
 * The state HTTP routes' schemas (http/schema.ts): the shapes fastify checks before a route
 * runs. What the values mean (keys, sizes, ttlInSeconds, operations) the state service checks.
 */
import { route, STRING_MAP, type JsonSchema } from '../http/schema.ts';

const STORE = { storename: 'the state store component' };
const KEY = { ...STORE, key: 'the key, as the app knows it (no prefix)' };
const CONSISTENCY = ['', 'eventual', 'strong'];
const CONCURRENCY = ['', 'first-write', 'last-write'];

/** One item of a save, or the request of a transaction's operation. */
const ITEM: JsonSchema = {
  type: 'object',
  required: ['key'],
  properties: {
    key: { type: 'string' },
    value: { description: 'any JSON value; stored as its JSON text' },
    etag: { type: ['string', 'null'] },
    metadata: STRING_MAP,
    options: {
      type: ['object', 'null'],
      properties: { concurrency: { type: ['string', 'null'], enum: [...CONCURRENCY, null] }, consistency: { type: ['string', 'null'], enum: [...CONSISTENCY, null] } },
    },
  },
};

export const SAVE = route('state.save', 'Save state items', {
  params: STORE,
  metadata: true,
  body: { type: 'array', items: ITEM, description: 'send a JSON array of {key, value, etag?, metadata?, options?}' },
  responses: { '204': 'saved' },
});

export const GET = route('state.get', 'Get a state item', {
  params: KEY,
  query: { consistency: { type: 'string', enum: CONSISTENCY } },
  metadata: true,
  responses: { '200': 'the value as stored (JSON as sent), with its ETag', '204': 'no such key' },
});

export const DELETE = route('state.delete', 'Delete a state item', {
  params: KEY,
  query: { concurrency: { type: 'string', enum: CONCURRENCY }, consistency: { type: 'string', enum: CONSISTENCY } },
  metadata: true,
  headers: { 'if-match': 'the etag the item must have' },
  responses: { '204': 'deleted, or there was no such key' },
});

export const BULK_GET = route('state.bulk', 'Get several state items', {
  params: STORE,
  metadata: true,
  body: {
    type: 'object',
    required: ['keys'],
    properties: { keys: { type: 'array', items: { type: 'string' } }, parallelism: { type: ['integer', 'null'], minimum: 0 }, metadata: STRING_MAP },
    description: 'send {"keys": [...], "parallelism": n}',
  },
  responses: { '200': 'a JSON array of {key, data?, etag?, metadata?} in the order of the keys' },
});

export const TRANSACTION = route('state.transaction', 'Upsert and delete state items, all or none', {
  params: STORE,
  metadata: true,
  body: {
    type: 'object',
    required: ['operations'],
    properties: {
      operations: { type: 'array', items: { type: 'object', required: ['operation', 'request'], properties: { operation: { type: 'string', description: 'upsert or delete' }, request: ITEM } } },
      metadata: STRING_MAP,
    },
    description: 'send {"operations": [{"operation": "upsert"|"delete", "request": {...}}], "metadata": {...}}',
  },
  responses: { '204': 'done' },
});

export const QUERY = route('state.query', 'Query a state store (alpha)', {
  params: STORE,
  metadata: true,
  body: { type: 'object', description: 'send a query: {"filter": {...}, "sort": [...], "page": {...}}' },
  responses: { '200': '{results: [{key, data, etag}], token?, metadata?}' },
});

export const STATE_SCHEMAS = [SAVE, GET, DELETE, BULK_GET, TRANSACTION, QUERY];
