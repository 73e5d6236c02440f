/**
 * Property tests of the state endpoints through a real sidecar: thousands of random bodies,
 * keys, headers and query strings only ever get 2xx or 4xx JSON answers, the sidecar stays
 * up, and data stored before the storm is unchanged.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStateSidecar, type StateSidecar } from './sidecar.ts';

let s: StateSidecar;
const STORES = ['mem', 'lite'];
const SENTINEL = 'sentinel-\u00d8-key';
const sentinelValue = { keep: ['me', 1, true], nested: { 'ü': null } };
const sentinelEtags: Record<string, string> = {};

beforeAll(async () => {
  s = await startStateSidecar('fuzz', [
    { name: 'mem', type: 'state.in-memory' },
    { name: 'lite', type: 'state.sqlite', metadata: { connectionString: ':memory:' } },
  ]);
  for (const store of STORES) {
    const r = await fetch(`${s.base}/v1.0/state/${store}`, { method: 'POST', body: JSON.stringify([{ key: SENTINEL, value: sentinelValue }]) });
    expect(r.status).toBe(204);
    sentinelEtags[store] = (await fetch(`${s.base}/v1.0/state/${store}/${encodeURIComponent(SENTINEL)}`)).headers.get('etag')!;
  }
});

afterAll(async () => {
  if (!s) return;
  // the sidecar survived and the sentinels are untouched
  expect((await fetch(`${s.base}/v1.0/healthz`)).status).toBe(204);
  for (const store of STORES) {
    const r = await fetch(`${s.base}/v1.0/state/${store}/${encodeURIComponent(SENTINEL)}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('etag')).toBe(sentinelEtags[store]);
    expect(await r.json()).toEqual(sentinelValue);
  }
  await s.stop();
});

/** Every answer is 2xx, or 4xx with the JSON error shape. */
async function expectSane(r: Response, what: string): Promise<void> {
  const text = await r.text();
  expect(r.status < 500, `${what} → ${r.status} ${text.slice(0, 300)}`).toBe(true);
  if (r.status >= 400) {
    const body = JSON.parse(text) as { errorCode?: unknown; message?: unknown; details?: unknown };
    expect(typeof body.errorCode, `${what} → ${text.slice(0, 300)}`).toBe('string');
    expect(typeof body.message).toBe('string');
    expect(Array.isArray(body.details)).toBe(true);
  }
}

const notSentinel = (k: unknown) => typeof k !== 'string' || !k.startsWith('sentinel');
const key = fc.oneof(fc.string({ maxLength: 30 }), fc.string({ unit: 'grapheme', maxLength: 20 }), fc.constantFrom('', 'a||b', '\0', '\ud800', 'k'.repeat(2000), 'bulk', 'transaction')).filter(notSentinel);
const metadata = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 12 }), fc.oneof(fc.string({ maxLength: 12 }), fc.integer())),
  fc.record({ ttlInSeconds: fc.oneof(fc.constantFrom('1', '-1', '0', '-2', 'x', '99999999999', ' 5', '3600'), fc.string({ maxLength: 5 })) }),
  fc.anything(),
);
const options = fc.oneof(
  fc.record({ concurrency: fc.constantFrom('first-write', 'last-write', 'other', ''), consistency: fc.constantFrom('eventual', 'strong', 'x') }, { requiredKeys: [] }),
  fc.anything(),
);
const etag = fc.oneof(fc.constantFrom('1', '2', '0', '18446744073709551616', '-1', 'W/"x"'), fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null));
const item = fc.record({ key: fc.oneof(key, fc.anything()), value: fc.anything(), etag, metadata, options }, { requiredKeys: [] });
const storeName = fc.oneof(fc.constantFrom(...STORES), fc.constantFrom(...STORES), fc.string({ maxLength: 10 }).filter((n) => n.length > 0));
const contentType = fc.constantFrom('application/json', 'text/plain', 'application/octet-stream', undefined, 'application/json; charset=utf-8');

/** A body: mostly well-shaped JSON with random parts, sometimes plain garbage. */
function bodyOf<T>(shaped: fc.Arbitrary<T>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: shaped.map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 2, arbitrary: fc.json() },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom('', '[', '{"__proto__":{"x":1}}', '[{"key":"k","value":1}', 'null', '[]', '{}') },
  );
}

/** A key as a path segment: percent-encoded, or raw (fetch encodes what it must). */
const seg = (k: string, raw: boolean) => (raw ? k.replace(/[/?#%]/g, '') : encodeURIComponent(k.toWellFormed()));

describe('state API under random input', () => {
  it('POST /v1.0/state/<store> with random bodies', async () => {
    await fc.assert(
      fc.asyncProperty(storeName, bodyOf(fc.oneof(fc.array(item, { maxLength: 5 }), item)), contentType, async (store, body, ct) => {
        const headers: Record<string, string> = ct ? { 'content-type': ct } : {};
        await expectSane(await fetch(`${s.base}/v1.0/state/${encodeURIComponent(store)}`, { method: 'POST', headers, body }), `POST ${store} ${body}`);
      }),
      { numRuns: 1200 },
    );
  }, 120_000); // 1,200-1,500 HTTP requests each: 30 s was too short beside load 16

  it('GET and DELETE with random keys, headers and query strings', async () => {
    const query = fc.dictionary(fc.oneof(fc.constantFrom('metadata.ttlInSeconds', 'consistency', 'concurrency', 'metadata.x'), fc.string({ maxLength: 8 })), fc.string({ maxLength: 8 }), { maxKeys: 3 });
    await fc.assert(
      fc.asyncProperty(storeName, key, fc.boolean(), query, fc.option(etag.map(String)), fc.constantFrom('GET', 'DELETE'), async (store, k, raw, q, ifMatch, method) => {
        const qs = new URLSearchParams(q).toString();
        const path = `${s.base}/v1.0/state/${encodeURIComponent(store)}/${seg(k, raw)}${qs ? `?${qs}` : ''}`;
        const headers: Record<string, string> = {};
        if (ifMatch !== null) headers['if-match'] = ifMatch.replace(/[^\x20-\x7e]/g, '');
        let r: Response;
        try {
          r = await fetch(path, { method, headers });
        } catch {
          return; // fetch itself refused the URL (never reached the sidecar)
        }
        if (r.status === 404 && seg(k, raw) === '') return void (await r.text()); // no key segment: no such route
        await expectSane(r, `${method} ${path}`);
      }),
      { numRuns: 1200 },
    );
  }, 120_000); // 1,200-1,500 HTTP requests each: 30 s was too short beside load 16

  it('POST bulk, transaction and query with random bodies', async () => {
    const bulk = fc.record({ keys: fc.oneof(fc.array(key, { maxLength: 6 }), fc.anything()), parallelism: fc.oneof(fc.integer(), fc.anything()), metadata }, { requiredKeys: [] });
    const op = fc.record({ operation: fc.constantFrom('upsert', 'delete', 'merge', '', 'UPSERT'), request: fc.oneof(item, fc.anything()) }, { requiredKeys: [] });
    const tx = fc.record({ operations: fc.oneof(fc.array(op, { maxLength: 5 }), fc.anything()), metadata }, { requiredKeys: [] });
    const field = fc.oneof(fc.constantFrom('a', 'a.b', 'keep', ''), fc.string({ maxLength: 6 }));
    const filter = fc.letrec((tie) => ({
      f: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.dictionary(fc.constantFrom('EQ', 'NEQ', 'GT', 'LT', 'IN', 'LIKE'), fc.dictionary(field, fc.oneof(fc.jsonValue(), fc.array(fc.string()))), { minKeys: 1, maxKeys: 2 }),
        fc.dictionary(fc.constantFrom('AND', 'OR'), fc.array(tie('f'), { maxLength: 3 }), { minKeys: 1, maxKeys: 1 }),
      ),
    })).f;
    const query = fc.record({ filter, sort: fc.array(fc.record({ key: field, order: fc.constantFrom('ASC', 'DESC', 'x') })), page: fc.record({ limit: fc.oneof(fc.integer(), fc.anything()), token: fc.oneof(fc.string({ maxLength: 4 }), fc.anything()) }) }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(storeName, fc.oneof(bodyOf(bulk).map((b) => ['bulk', b]), bodyOf(tx).map((b) => ['transaction', b]), bodyOf(query).map((b) => ['query', b])), contentType, async (store, [what, body], ct) => {
        const headers: Record<string, string> = ct ? { 'content-type': ct } : {};
        const path = what === 'query' ? `/v1.0-alpha1/state/${encodeURIComponent(store)}/query` : `/v1.0/state/${encodeURIComponent(store)}/${what}`;
        await expectSane(await fetch(`${s.base}${path}`, { method: 'POST', headers, body }), `POST ${path} ${body}`);
      }),
      { numRuns: 1500 },
    );
  }, 120_000); // 1,200-1,500 HTTP requests each: 30 s was too short beside load 16
});
