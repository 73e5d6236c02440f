/**
 * Query strings, read one way for every route. `metadata.<name>=<value>` parameters are a
 * request's metadata, as the ecosystem's HTTP API sends it (state, pub/sub, secrets): a
 * repeated name keeps its last value, `metadata.` with no name is left out, and every name is
 * an own, plain entry (a "__proto__" name stays data).
 */
import { malformed } from './errors.ts';

const PREFIX = 'metadata.';

/** The `metadata.*` parameters of a parsed query string; undefined when there are none. */
export function queryMetadata(query: unknown): Record<string, string> | undefined {
  if (typeof query !== 'object' || query === null) return undefined;
  let out: Record<string, string> | undefined;
  for (const k in query) {
    if (k.length <= PREFIX.length || !k.startsWith(PREFIX) || !Object.hasOwn(query, k)) continue;
    const v = (query as Record<string, unknown>)[k];
    out ??= {};
    Object.defineProperty(out, k.slice(PREFIX.length), { value: String(Array.isArray(v) ? v[v.length - 1] : v), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** A query parameter that may occur once at most; undefined when absent. */
export function queryParam(query: unknown, name: string): string | undefined {
  if (typeof query !== 'object' || query === null || !Object.hasOwn(query, name)) return undefined;
  const v = (query as Record<string, unknown>)[name];
  if (Array.isArray(v)) throw malformed(`query parameter ${name} is given more than once`);
  return String(v);
}
