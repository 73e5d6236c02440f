/**
 * The one reader of `metadata.*` query parameters (sidecar/src/http/query.ts), property-tested:
 * over any parsed query (as fastify's parser gives it, repeated names as arrays) it keeps exactly
 * the `metadata.<name>` parameters with a name, each with its last value, as own plain entries;
 * and through a real sidecar's secrets route the store receives what the query string said.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinCatalog } from '../../sidecar/src/components/catalog.ts';
import type { SecretStore } from '../../sidecar/src/components/types.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { queryMetadata, queryParam } from '../../sidecar/src/http/query.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

const name = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('', '__proto__', 'constructor', 'toString', 'a.b', 'ttlInSeconds'));
const value = fc.oneof(fc.string({ maxLength: 12 }), fc.array(fc.string({ maxLength: 6 }), { minLength: 1, maxLength: 3 }));
const key = fc.oneof(name.map((n) => `metadata.${n}`), name, fc.constantFrom('metadata', 'metadata.', 'Metadata.x', 'consistency'));

/** What the parser must give: `metadata.<name>` (name not empty) → its last value. */
function expected(query: [string, string | string[]][]): Record<string, string> | undefined {
  const out = new Map<string, string>();
  for (const [k, v] of query) if (k.startsWith('metadata.') && k.length > 'metadata.'.length) out.set(k.slice(9), Array.isArray(v) ? v[v.length - 1] : v);
  return out.size ? Object.fromEntries(out) : undefined;
}

/** A parsed query as fastify's parser makes it: a prototype-less object, own keys only. */
function parsed(entries: [string, string | string[]][]): Record<string, string | string[]> {
  const q: Record<string, string | string[]> = Object.create(null);
  for (const [k, v] of entries) Object.defineProperty(q, k, { value: v, enumerable: true, writable: true, configurable: true });
  return q;
}

describe('metadata.* query parameters', () => {
  it('keep exactly the named metadata parameters, the last value of a repeated one, as plain own entries', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 8 }), (entries) => {
        const got = queryMetadata(parsed(entries));
        const want = expected(entries);
        if (!want) {
          expect(got).toBeUndefined();
          return;
        }
        expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
        expect(Object.keys(got!).sort()).toEqual(Object.keys(want).sort());
        for (const k of Object.keys(want)) expect(Object.getOwnPropertyDescriptor(got, k)?.value).toBe(want[k]);
      }),
      { numRuns: 2000 },
    );
  });

  it('read nothing from a prototype and nothing but objects', () => {
    const inherited = Object.create({ 'metadata.a': 'x' }) as Record<string, string>;
    expect(queryMetadata(inherited)).toBeUndefined();
    for (const q of [undefined, null, 'metadata.a=1', 5]) expect(queryMetadata(q)).toBeUndefined();
  });

  it('a parameter that may occur once: its value, undefined when absent, a 400 when repeated', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 6 }), key, (entries, k) => {
        const q = parsed(entries);
        const v = entries.find(([e]) => e === k)?.[1];
        if (v === undefined) expect(queryParam(q, k)).toBeUndefined();
        else if (Array.isArray(v)) expect(() => queryParam(q, k)).toThrow(ApiError);
        else expect(queryParam(q, k)).toBe(v);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('metadata.* query parameters through a real sidecar', () => {
  let sidecar: Sidecar;
  let dir: string;
  const seen: (Record<string, string> | undefined)[] = [];
  beforeAll(async () => {
    const catalog = builtinCatalog();
    const store = {
      init: async () => {},
      close: async () => {},
      capabilities: () => [],
      getSecret: async (_k: string, md?: Record<string, string>) => {
        seen.push(md && { ...md });
        return { v: '1' };
      },
      bulkGetSecret: async (md?: Record<string, string>) => {
        seen.push(md && { ...md });
        return {};
      },
    } as unknown as SecretStore;
    catalog.add('secretstores.recording', { category: 'secretstores', load: async () => () => store });
    dir = await mkdtemp(join(tmpdir(), 'rt-query-'));
    await writeFile(join(dir, 'rec.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: rec\nspec:\n  type: secretstores.recording\n  version: v1\n  metadata: []\n');
    sidecar = await startSidecar({ appId: 'query', httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [dir], catalog, logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    await sidecar?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('hands the store what the query string said', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.oneof(name.map((n) => `metadata.${n}`), name), fc.string({ maxLength: 8 })), { maxLength: 6 }), async (pairs) => {
        const search = new URLSearchParams(pairs).toString();
        seen.length = 0;
        const res = await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/secrets/rec/k${search ? `?${search}` : ''}`);
        expect(res.status).toBe(200);
        const grouped = new Map<string, string[]>();
        for (const [k, v] of pairs) grouped.set(k, [...(grouped.get(k) ?? []), v]);
        expect(seen[0] ?? {}).toEqual(expected([...grouped].map(([k, vs]) => [k, vs.length === 1 ? vs[0] : vs])) ?? {});
      }),
      { numRuns: 100 },
    );
  });
});
