/**
 * The state query language (components/state/query.ts) translated to SQL over the values of
 * the PostgreSQL store, with the same meaning as the JavaScript evaluation the embedded
 * stores use (test/state/query.test.ts checks both give the same answers):
 * - values are read as JSON through `<table>_jsonb(value)`, NULL when not JSON (never matches);
 * - comparisons only between values of the same type (number, string, boolean), strings by
 *   code point (COLLATE "C"); a missing field never equals, always differs;
 * - sort: items without the field last, then by type (null, boolean, number, string, other),
 *   then by value; ties by key.
 * Every value from the caller is a bound parameter.
 */
import type { QueryFilter, StateQuery } from '../query.ts';

type Scalar = string | number | boolean | null;

export interface QuerySql {
  text: string;
  values: unknown[];
}

const OPS: Record<string, string> = { GT: '>', GTE: '>=', LT: '<', LTE: '<=' };

/** SELECT key, value, etag of one page (limit + 1 rows, to know whether there is more). */
export function querySql(table: string, jsonFn: string, q: StateQuery, keyPrefix: string): QuerySql {
  const values: unknown[] = [keyPrefix];
  const param = (v: unknown, cast: string) => {
    values.push(v);
    return `$${values.length}::${cast}`;
  };
  const field = (path: string[]) => `(doc #> ${param(path, 'text[]')})`;

  const scalarCompare = (x: string, op: string, v: Exclude<Scalar, null>): string => {
    if (typeof v === 'number') return `(jsonb_typeof(${x}) = 'number' AND (${x} #>> '{}')::numeric ${op} ${param(String(v), 'numeric')})`;
    if (typeof v === 'string') return `(jsonb_typeof(${x}) = 'string' AND (${x} #>> '{}') COLLATE "C" ${op} ${param(v, 'text')} COLLATE "C")`;
    return `(jsonb_typeof(${x}) = 'boolean' AND (${x} #>> '{}')::boolean ${op} ${param(v, 'boolean')})`;
  };

  const where = (f: QueryFilter): string => {
    switch (f.op) {
      case 'AND':
      case 'OR':
        return `(${f.filters.map(where).join(` ${f.op} `)})`;
      case 'EQ':
        return `(${field(f.path)} = ${param(JSON.stringify(f.value), 'jsonb')})`;
      case 'NEQ':
        return `(${field(f.path)} IS DISTINCT FROM ${param(JSON.stringify(f.value), 'jsonb')})`;
      case 'IN': {
        const x = field(f.path);
        return `(jsonb_typeof(${x}) NOT IN ('object', 'array') AND ${param(JSON.stringify(f.values), 'jsonb')} @> jsonb_build_array(${x}))`;
      }
      default:
        // nothing orders against null (and no parameter may go unused)
        if (f.value === null) return 'FALSE';
        return scalarCompare(field(f.path), OPS[f.op], f.value);
    }
  };

  const order: string[] = [];
  for (const s of q.sort) {
    const x = field(s.path);
    const dir = s.desc ? 'DESC' : 'ASC';
    order.push(
      `(${x} IS NULL) ASC`,
      `CASE jsonb_typeof(${x}) WHEN 'null' THEN 0 WHEN 'boolean' THEN 1 WHEN 'number' THEN 2 WHEN 'string' THEN 3 ELSE 4 END ${dir}`,
      `CASE WHEN jsonb_typeof(${x}) = 'number' THEN (${x} #>> '{}')::numeric END ${dir}`,
      `CASE WHEN jsonb_typeof(${x}) = 'string' THEN (${x} #>> '{}') END COLLATE "C" ${dir}`,
      `CASE WHEN jsonb_typeof(${x}) = 'boolean' THEN (${x} #>> '{}')::boolean END ${dir}`,
    );
  }
  order.push('key COLLATE "C" ASC');

  let text = `WITH docs AS (
    SELECT key, value, etag, ${jsonFn}(value) AS doc FROM ${table}
    WHERE starts_with(key, $1::text) AND (expires_at IS NULL OR expires_at > now())
  )
  SELECT key, value, etag FROM docs WHERE doc IS NOT NULL${q.filter ? ` AND ${where(q.filter)}` : ''}
  ORDER BY ${order.join(', ')}`;
  if (q.limit > 0) text += ` LIMIT ${param(q.limit + 1, 'bigint')}`;
  if (q.offset > 0) text += ` OFFSET ${param(q.offset, 'bigint')}`;
  return { text, values };
}
