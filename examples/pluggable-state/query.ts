/**
 * Queries of the example store (dapr.proto.components.v1.QueriableStateStore): the filter,
 * sort and page of a QueryRequest run over the JSON values of the store's items.
 *
 * The filter map has one entry: the operator (EQ, NEQ, GT, GTE, LT, LTE, IN, AND, OR) and, in a
 * google.protobuf.Any, its argument as JSON text (`{"person.org": "Dev Ops"}`, `{"state": ["CA"]}`,
 * or for AND/OR an array of `{operator: argument}`). Field paths are dot-separated. Items whose
 * value is not JSON never match. The page token is this store's own: the offset of the next
 * page, base64url-encoded.
 */
import { BadRequestError, type Entry } from './store.ts';

export interface QueryRequest {
  query: {
    filter: Record<string, { type_url: string; value: Buffer }>;
    sort: { key: string; order: string }[];
    pagination: { limit: string; token: string } | null;
  } | null;
  metadata: Record<string, string>;
}

type Doc = unknown;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(doc: Doc, path: string): unknown {
  let cur = doc;
  for (const p of path.split('.')) {
    if (!isObject(cur) || !Object.hasOwn(cur, p)) return undefined;
    cur = cur[p];
  }
  return cur;
}

/** Numbers by value, strings by code point; undefined when they cannot be compared. */
function compare(a: unknown, b: unknown): number | undefined {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return undefined;
}

/** One `{field: value}` pair of a comparison. */
function pair(op: string, arg: unknown): [string, unknown] {
  if (!isObject(arg) || Object.keys(arg).length !== 1) throw new BadRequestError(`${op} needs {"<field>": <value>}`);
  return Object.entries(arg)[0];
}

/** A filter as a predicate over documents. */
function predicate(op: string, arg: unknown): (doc: Doc) => boolean {
  if (op === 'AND' || op === 'OR') {
    if (!Array.isArray(arg) || arg.length === 0) throw new BadRequestError(`${op} needs a non-empty array of filters`);
    const parts = arg.map((f) => {
      if (!isObject(f) || Object.keys(f).length !== 1) throw new BadRequestError(`each filter of ${op} needs one operator`);
      const [o, a] = Object.entries(f)[0];
      return predicate(o, a);
    });
    return op === 'AND' ? (d) => parts.every((p) => p(d)) : (d) => parts.some((p) => p(d));
  }
  const [path, value] = pair(op, arg);
  const cmp = (test: (c: number) => boolean) => (d: Doc) => {
    const c = compare(field(d, path), value);
    return c !== undefined && test(c);
  };
  switch (op) {
    case 'EQ':
      return (d) => field(d, path) === value;
    case 'NEQ':
      return (d) => field(d, path) !== value;
    case 'IN':
      if (!Array.isArray(value)) throw new BadRequestError('IN needs {"<field>": [values]}');
      return (d) => value.includes(field(d, path));
    case 'GT':
      return cmp((c) => c > 0);
    case 'GTE':
      return cmp((c) => c >= 0);
    case 'LT':
      return cmp((c) => c < 0);
    case 'LTE':
      return cmp((c) => c <= 0);
    default:
      throw new BadRequestError(`unknown filter operator "${op.slice(0, 20)}"`);
  }
}

/** The operator's argument: JSON text in the Any's value (its type_url is empty). */
function argument(op: string, value: Buffer): unknown {
  try {
    return JSON.parse(value.toString('utf8'));
  } catch {
    throw new BadRequestError(`the ${op} filter is not JSON`);
  }
}

function offsetOf(token: string): number {
  if (!token) return 0;
  const text = Buffer.from(token, 'base64url').toString('utf8');
  if (!/^\d{1,9}$/.test(text) || Buffer.from(text).toString('base64url') !== token) throw new BadRequestError('the page token is not one this store gave out');
  return Number(text);
}

/** Runs a query over the items; BadRequestError for a query this store cannot read. */
export function runQuery(items: Iterable<[string, Entry]>, req: QueryRequest) {
  const filters = Object.entries(req.query?.filter ?? {});
  if (filters.length > 1) throw new BadRequestError('the filter has more than one operator');
  const match = filters.length ? predicate(filters[0][0], argument(filters[0][0], filters[0][1].value)) : () => true;
  const hits: { key: string; entry: Entry; doc: Doc }[] = [];
  for (const [key, entry] of items) {
    let doc: Doc;
    try {
      doc = JSON.parse(entry.value.toString('utf8'));
    } catch {
      continue;
    }
    if (match(doc)) hits.push({ key, entry, doc });
  }
  const sort = req.query?.sort ?? [];
  hits.sort((x, y) => {
    for (const s of sort) {
      const c = compare(field(x.doc, s.key), field(y.doc, s.key)) ?? 0;
      if (c !== 0) return s.order === 'DESC' ? -c : c;
    }
    return x.key < y.key ? -1 : x.key > y.key ? 1 : 0;
  });
  const offset = offsetOf(req.query?.pagination?.token ?? '');
  const limit = Number(req.query?.pagination?.limit ?? 0);
  const end = limit > 0 ? offset + limit : hits.length;
  return {
    items: hits.slice(offset, end).map(({ key, entry }) => ({ key, data: entry.value, etag: { value: entry.etag }, error: '', contentType: entry.contentType })),
    token: end < hits.length ? Buffer.from(String(end)).toString('base64url') : '',
    metadata: {},
  };
}
