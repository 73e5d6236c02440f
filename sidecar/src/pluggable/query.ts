/**
 * A state query as dapr.proto.components.v1.QueriableStateStore carries it, the way the
 * ecosystem's runtime sends it, so components written with its pluggable SDKs read it unchanged:
 *
 * - `Query.filter` is the query's `filter` object: its one operator (`EQ`, `IN`, `AND`, …) is the
 *   map key, and the operator's argument is a `google.protobuf.Any` with an empty `type_url`
 *   whose `value` is that argument as JSON, encoded as Go's encoding/json does (object keys
 *   sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped), e.g. `"AND"` → `[{"EQ":{"a":1}},{"IN":{"b":["x"]}}]`.
 *   The Go SDK reads it back with json.Unmarshal of `value` (the type_url is not looked at).
 * - `sort`: key and order (ASC, DESC); `pagination` always set: limit (0 = the store's default)
 *   and the token the store gave out, passed through unread.
 * - `metadata`: the request's metadata (HTTP `metadata.*` query parameters, gRPC `metadata`).
 *
 * The answer: items with key, data, etag (none = no etag), a per-item error and content type;
 * a token (empty on the last page) and metadata.
 */
import type { QueryFilter, QueryHit, QueryResult, StateQuery } from '../components/state/query.ts';

/** google.protobuf.Any with no type URL (not even an empty one on the wire, as Go leaves it). */
interface AnyMsg {
  value: Buffer;
}

export interface QueryRequestMsg {
  query: {
    filter: Record<string, AnyMsg>;
    sort: { key: string; order: 'ASC' | 'DESC' }[];
    pagination: { limit: string; token: string };
  };
  metadata: Record<string, string>;
}

export interface QueryResponseMsg {
  items: { key: string; data: Buffer; etag: { value: string } | null; error: string; contentType: string }[];
  token: string;
  metadata: Record<string, string>;
}

/** The filter argument as the query's JSON had it: `{"a.b": v}`, `{"a": [v…]}` or `[{op: arg}…]`. */
function argument(f: QueryFilter): unknown {
  switch (f.op) {
    case 'AND':
    case 'OR':
      return f.filters.map((x) => ({ [x.op]: argument(x) }));
    case 'IN':
      return { [f.path.join('.')]: f.values };
    default:
      return { [f.path.join('.')]: f.value };
  }
}

export function toQueryRequest(q: StateQuery, metadata: Record<string, string>): QueryRequestMsg {
  const filter: Record<string, AnyMsg> = {};
  if (q.filter) filter[q.filter.op] = { value: Buffer.from(goJson(argument(q.filter)), 'utf8') };
  return {
    query: {
      filter,
      sort: q.sort.map((s) => ({ key: s.path.join('.'), order: s.desc ? 'DESC' : 'ASC' })),
      pagination: { limit: String(q.limit), token: q.token },
    },
    metadata,
  };
}

export function fromQueryResponse(res: QueryResponseMsg): QueryResult {
  const results = res.items.map((i) => {
    const hit: QueryHit = { key: i.key, value: new Uint8Array(i.data.buffer, i.data.byteOffset, i.data.byteLength) };
    if (i.etag && i.etag.value !== '') hit.etag = i.etag.value;
    if (i.error) hit.error = i.error;
    return hit;
  });
  const out: QueryResult = { results };
  if (res.token) out.token = res.token;
  if (Object.keys(res.metadata ?? {}).length > 0) out.metadata = { ...res.metadata };
  return out;
}

const GO_ESCAPED = /[<>&\u2028\u2029]/g;

/**
 * JSON as Go's json.Marshal writes a value decoded from JSON (numbers as float64): map keys in
 * byte order, HTML characters and line/paragraph separators escaped as \u00XX / \u20XX, -0 kept.
 * Control characters are escaped alike by both (\b \f \n \r \t, else \u00XX in lower case hex).
 */
export function goJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'number':
      // the same shortest form and exponent thresholds (1e-6, 1e21) as Go's float64 encoding
      return Object.is(v, -0) ? '-0' : String(v);
    case 'boolean':
      return String(v);
    case 'string':
      return JSON.stringify(v).replace(GO_ESCAPED, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    default:
      break;
  }
  if (Array.isArray(v)) return `[${v.map(goJson).join(',')}]`;
  const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  return `{${entries.map(([k, x]) => `${goJson(k)}:${goJson(x)}`).join(',')}}`;
}
