/**
 * Properties: the publish endpoints answer 204 or a JSON 4xx for any body, content type,
 * metadata and topic — never a 5xx or a hang; the CEL rules either refuse an expression when
 * compiled or route any event without throwing, and generated comparisons route exactly as the
 * same logic computed in JS.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileMatch, compileRules, matches, route } from '../../sidecar/src/pubsub/rules.ts';
import { component, startPubSubSidecar, type PubSubSidecar } from './helpers.ts';

let sc: PubSubSidecar;
beforeAll(async () => {
  sc = await startPubSubSidecar(component('mem', 'pubsub.in-memory'), { appId: 'fuzz' });
});
afterAll(async () => {
  await sc?.close();
});

const contentType = fc.constantFrom('application/json', 'application/cloudevents+json', 'text/plain', 'application/octet-stream', 'application/xml', '', 'application/json; charset=utf-8', 'application/cloudevents+json; charset=utf-8');
const body = fc.oneof(
  fc.json(),
  fc.string(),
  fc.uint8Array({ maxLength: 256 }).map((b) => Buffer.from(b).toString('latin1')),
  fc.record({ specversion: fc.constantFrom('1.0', 1, null), id: fc.oneof(fc.string(), fc.integer()), data: fc.jsonValue() }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
  fc.constant('{"a":'.repeat(600)),
);
const metadata = fc.dictionary(fc.constantFrom('rawPayload', 'ttlInSeconds', 'x', '__proto__', 'constructor'), fc.oneof(fc.constantFrom('true', 'false', '0', '-1', '10', '1e3', ''), fc.string()), { maxKeys: 3 });
const topic = fc.oneof(fc.constantFrom('t', 'a/b', 'ü', '%2F'), fc.stringMatching(/^[A-Za-z0-9._~-]{1,20}$/));

function query(md: Record<string, string>): string {
  const q = Object.entries(md).map(([k, v]) => `metadata.${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return q.length ? `?${q.join('&')}` : '';
}

async function expectClean(res: Response): Promise<void> {
  if (res.status === 204) return;
  expect([400, 404, 413, 415]).toContain(res.status);
  const b = (await res.json()) as { errorCode: unknown; message: unknown };
  expect(typeof b.errorCode).toBe('string');
  expect(typeof b.message).toBe('string');
}

describe('publish endpoints under random input', () => {
  it('POST /v1.0/publish answers 204 or a JSON 4xx', { timeout: 60_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('mem', 'nope'), topic, contentType, body, metadata, async (ps, t, ct, b, md) => {
        const headers: Record<string, string> = ct ? { 'content-type': ct } : {};
        await expectClean(await fetch(`${sc.base}/v1.0/publish/${ps}/${t}${query(md)}`, { method: 'POST', body: b, headers }));
      }),
      { numRuns: 150 },
    );
  });

  it('POST /v1.0-alpha1/publish/bulk answers 204 or a JSON 4xx', { timeout: 60_000 }, async () => {
    const entry = fc.record({ entryId: fc.oneof(fc.string(), fc.integer()), event: fc.jsonValue(), contentType: fc.oneof(contentType, fc.integer()), metadata: fc.oneof(fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }), fc.jsonValue()) }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(topic, fc.oneof(fc.array(entry, { maxLength: 5 }).map((x) => JSON.stringify(x)), body), metadata, async (t, b, md) => {
        await expectClean(await fetch(`${sc.base}/v1.0-alpha1/publish/bulk/mem/${t}${query(md)}`, { method: 'POST', body: b, headers: { 'content-type': 'application/json' } }));
      }),
      { numRuns: 150 },
    );
  });
});

describe('CEL rules under random input', () => {
  it('any string either is refused at compile time or routes any event without throwing', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), fc.jsonValue(), (expr, event) => {
        let rules;
        try {
          rules = compileRules([{ match: expr, path: '/m' }, { match: '', path: '/d' }]);
        } catch (e) {
          expect((e as Error).message).toMatch(/does not parse/);
          return;
        }
        expect(['/m', '/d']).toContain(route(rules, event));
      }),
      { numRuns: 500 },
    );
  });

  type Node = { cel: string; js: (d: Record<string, number>) => boolean };
  const field = fc.constantFrom('a', 'b', 'c');
  const cmp: fc.Arbitrary<Node> = fc.tuple(field, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), fc.integer({ min: -3, max: 3 })).map(([f, op, n]) => ({
    cel: `event.data.${f} ${op} ${n}`,
    js: (d) => {
      const v = d[f];
      return op === '==' ? v === n : op === '!=' ? v !== n : op === '<' ? v < n : op === '<=' ? v <= n : op === '>' ? v > n : v >= n;
    },
  }));
  const expr: fc.Arbitrary<Node> = fc.letrec<{ e: Node }>((tie) => ({
    e: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      cmp,
      fc.tuple(tie('e'), tie('e')).map(([l, r]) => ({ cel: `(${l.cel} && ${r.cel})`, js: (d: Record<string, number>) => l.js(d) && r.js(d) })),
      fc.tuple(tie('e'), tie('e')).map(([l, r]) => ({ cel: `(${l.cel} || ${r.cel})`, js: (d: Record<string, number>) => l.js(d) || r.js(d) })),
      tie('e').map((x) => ({ cel: `!(${x.cel})`, js: (d: Record<string, number>) => !x.js(d) })),
    ),
  })).e;

  it('generated comparisons over event.data match exactly when the same logic in JS is true', () => {
    fc.assert(
      fc.property(expr, fc.record({ a: fc.integer({ min: -3, max: 3 }), b: fc.integer({ min: -3, max: 3 }), c: fc.integer({ min: -3, max: 3 }) }, { noNullPrototype: true }), (e, data) => {
        expect(matches(compileMatch(e.cel), { data })).toBe(e.js(data));
      }),
      { numRuns: 300 },
    );
  });
});
