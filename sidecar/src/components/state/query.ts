/**
 * The state query API (alpha) for stores that hold their items where the sidecar can scan
 * them (in-memory, SQLite): the ecosystem's query language evaluated in JavaScript.
 *
 *   {"filter": {"AND": [{"EQ": {"person.org": "Dev Ops"}}, {"IN": {"state": ["CA", "WA"]}}]},
 *    "sort": [{"key": "person.id", "order": "DESC"}], "page": {"limit": 10, "token": "20"}}
 *
 * Operators: EQ, NEQ, GT, GTE, LT, LTE (one `path: value`), IN (`path: [values]`), AND, OR
 * (arrays of filters). Paths are dot-separated fields of the JSON value (an integer segment
 * indexes an array). Items whose value is not JSON never match. The page token is the offset
 * of the next page. PostgreSQL runs the same language as SQL (postgresql/query.ts). Pluggable
 * stores get the query forwarded (pluggable/query.ts) and give out tokens of their own.
 */
import type { StateItem, StateStore } from '../types.ts';
import { StateRequestError } from './errors.ts';

type Scalar = string | number | boolean | null;
export type QueryFilter =
  | { op: 'EQ' | 'NEQ' | 'GT' | 'GTE' | 'LT' | 'LTE'; path: string[]; value: Scalar }
  | { op: 'IN'; path: string[]; values: Scalar[] }
  | { op: 'AND' | 'OR'; filters: QueryFilter[] };

export interface StateQuery {
  filter?: QueryFilter;
  sort: { path: string[]; desc: boolean }[];
  limit: number;
  offset: number;
  /** page.token as given ('' when none): the offset as text, or a store's own token. */
  token: string;
}

export interface QueryHit {
  key: string;
  value: Uint8Array;
  etag?: string;
  /** A store's error for this one item (pluggable stores may send one). */
  error?: string;
}

export interface QueryResult {
  results: QueryHit[];
  /** Offset of the next page (or a store's own token); absent on the last page. */
  token?: string;
  /** What a store says of the answer (pluggable stores may send some). */
  metadata?: Record<string, string>;
}

/** A store that can answer queries over the keys starting with `keyPrefix`. */
export interface QueryableStateStore extends StateStore {
  query(q: StateQuery, keyPrefix: string, metadata?: Record<string, string>): Promise<QueryResult>;
  /** The store gives out page tokens of its own, passed through unread (offsets otherwise). */
  readonly opaqueQueryTokens?: boolean;
}

export function isQueryable(s: StateStore): s is QueryableStateStore {
  return typeof (s as Partial<QueryableStateStore>).query === 'function' && s.features().includes('QUERY_API');
}

const COMPARE = new Set(['EQ', 'NEQ', 'GT', 'GTE', 'LT', 'LTE']);
const MAX_DEPTH = 32;
const MAX_LIMIT = 10_000;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Strings must be valid Unicode text without NUL, which no store can compare as text. */
function isScalar(v: unknown): v is Scalar {
  return v === null || (typeof v === 'string' && isText(v)) || (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean';
}

function isText(s: string): boolean {
  return s.isWellFormed() && !s.includes('\0');
}

function parsePath(p: string, where: string): string[] {
  if (p === '' || !isText(p) || p.split('.').some((s) => s === '')) throw new StateRequestError(`${where}: "${p.slice(0, 60)}" is not a field path such as "person.org"`);
  return p.split('.');
}

function parseFilter(v: unknown, where: string, depth: number): QueryFilter {
  if (depth > MAX_DEPTH) throw new StateRequestError(`${where}: filters nest deeper than ${MAX_DEPTH}`);
  if (!isObject(v) || Object.keys(v).length !== 1) throw new StateRequestError(`${where} must be an object with one operator (EQ, NEQ, GT, GTE, LT, LTE, IN, AND, OR)`);
  const [op, arg] = Object.entries(v)[0];
  if (op === 'AND' || op === 'OR') {
    if (!Array.isArray(arg) || arg.length === 0) throw new StateRequestError(`${where}.${op} must be a non-empty array of filters`);
    return { op, filters: arg.map((f, i) => parseFilter(f, `${where}.${op}[${i}]`, depth + 1)) };
  }
  if (!COMPARE.has(op) && op !== 'IN') throw new StateRequestError(`${where}: unknown operator "${op.slice(0, 20)}"; use EQ, NEQ, GT, GTE, LT, LTE, IN, AND or OR`);
  if (!isObject(arg) || Object.keys(arg).length !== 1) throw new StateRequestError(`${where}.${op} must be {"<field path>": <value>}`);
  const [path, value] = Object.entries(arg)[0];
  if (op === 'IN') {
    if (!Array.isArray(value) || !value.every(isScalar)) throw new StateRequestError(`${where}.IN.${path} must be an array of strings, numbers, booleans or null (text without NUL)`);
    return { op, path: parsePath(path, `${where}.IN`), values: value };
  }
  if (!isScalar(value)) throw new StateRequestError(`${where}.${op}.${path} must be a string, number, boolean or null (text without NUL)`);
  return { op: op as 'EQ', path: parsePath(path, `${where}.${op}`), value };
}

/**
 * Checks a query body; throws StateRequestError naming the bad part. With `opaqueToken`, any
 * string is a page token (the store's own); otherwise it must be an offset this module gave out.
 */
export function parseQuery(body: unknown, opts: { opaqueToken?: boolean } = {}): StateQuery {
  const v = isObject(body) && isObject(body.query) ? body.query : body;
  if (!isObject(v)) throw new StateRequestError('query must be an object with filter, sort and page');
  const q: StateQuery = { sort: [], limit: 0, offset: 0, token: '' };
  if (v.filter !== undefined && v.filter !== null && !(isObject(v.filter) && Object.keys(v.filter).length === 0)) q.filter = parseFilter(v.filter, 'filter', 0);
  if (v.sort !== undefined && v.sort !== null) {
    if (!Array.isArray(v.sort)) throw new StateRequestError('sort must be an array of {key, order}');
    q.sort = v.sort.map((s, i) => {
      if (!isObject(s) || typeof s.key !== 'string') throw new StateRequestError(`sort[${i}] must be {"key": "<field path>", "order": "ASC"|"DESC"}`);
      const order = s.order === undefined || s.order === null || s.order === '' ? 'ASC' : s.order;
      if (order !== 'ASC' && order !== 'DESC') throw new StateRequestError(`sort[${i}].order must be ASC or DESC`);
      return { path: parsePath(s.key, `sort[${i}].key`), desc: order === 'DESC' };
    });
  }
  if (v.page !== undefined && v.page !== null) {
    if (!isObject(v.page)) throw new StateRequestError('page must be {"limit": n, "token": "..."}');
    const { limit, token } = v.page;
    if (limit !== undefined && limit !== null) {
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0 || limit > MAX_LIMIT) throw new StateRequestError(`page.limit must be an integer from 0 to ${MAX_LIMIT}`);
      q.limit = limit;
    }
    if (token !== undefined && token !== null && token !== '') {
      if (typeof token !== 'string' || !(opts.opaqueToken || /^\d{1,9}$/.test(token))) throw new StateRequestError('page.token is not a token this store gave out');
      q.token = token;
      if (!opts.opaqueToken) q.offset = Number(token);
    }
  }
  return q;
}

/** The field at a path; an integer segment indexes an array (negative from the end). */
function at(doc: unknown, path: string[]): unknown {
  let cur = doc;
  for (const p of path) {
    if (Array.isArray(cur)) {
      if (!/^-?\d{1,9}$/.test(p)) return undefined;
      const i = Number(p);
      cur = cur[i < 0 ? cur.length + i : i];
      if (cur === undefined) return undefined;
      continue;
    }
    if (!isObject(cur) || !Object.hasOwn(cur, p)) return undefined;
    cur = cur[p];
  }
  return cur;
}

/** Order of two field values: numbers by value, strings by code point, else by type. */
function compare(a: unknown, b: unknown): number | undefined {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return undefined;
}

/** Sort order between values of different types. */
function typeRank(v: unknown): number {
  return v === null ? 0 : typeof v === 'boolean' ? 1 : typeof v === 'number' ? 2 : typeof v === 'string' ? 3 : 4;
}

function matches(f: QueryFilter, doc: unknown): boolean {
  switch (f.op) {
    case 'AND':
      return f.filters.every((x) => matches(x, doc));
    case 'OR':
      return f.filters.some((x) => matches(x, doc));
    case 'IN': {
      const v = at(doc, f.path);
      return f.values.some((x) => x === v);
    }
    case 'EQ':
      return at(doc, f.path) === f.value;
    case 'NEQ':
      return at(doc, f.path) !== f.value;
    default: {
      const c = compare(at(doc, f.path), f.value);
      if (c === undefined) return false;
      return f.op === 'GT' ? c > 0 : f.op === 'GTE' ? c >= 0 : f.op === 'LT' ? c < 0 : c <= 0;
    }
  }
}

/** Filters, sorts and pages items (already limited to the caller's key prefix). */
export function runQuery(items: Iterable<StateItem>, q: StateQuery): QueryResult {
  const hits: { item: StateItem; doc: unknown }[] = [];
  for (const item of items) {
    let doc: unknown;
    try {
      doc = JSON.parse(Buffer.from(item.value.buffer, item.value.byteOffset, item.value.byteLength).toString('utf8'));
    } catch {
      continue;
    }
    if (!q.filter || matches(q.filter, doc)) hits.push({ item, doc });
  }
  if (q.sort.length) {
    hits.sort((x, y) => {
      for (const s of q.sort) {
        const a = at(x.doc, s.path);
        const b = at(y.doc, s.path);
        // items without the field go last, whatever the order
        if (a === undefined || b === undefined) {
          if (a !== b) return a === undefined ? 1 : -1;
          continue;
        }
        const c = compare(a, b) ?? typeRank(a) - typeRank(b);
        if (c !== 0) return s.desc ? -c : c;
      }
      return x.item.key < y.item.key ? -1 : 1;
    });
  } else {
    hits.sort((x, y) => (x.item.key < y.item.key ? -1 : x.item.key > y.item.key ? 1 : 0));
  }
  const end = q.limit > 0 ? q.offset + q.limit : hits.length;
  const page = hits.slice(q.offset, end);
  const out: QueryResult = { results: page.map(({ item }) => ({ key: item.key, value: item.value, etag: item.etag })) };
  if (end < hits.length) out.token = String(end);
  return out;
}
