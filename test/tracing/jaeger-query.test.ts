/**
 * Reading the Jaeger query API's JSON (test/services/jaeger/query.ts) for any trace: ids at OTel's
 * full width whatever zeros Jaeger dropped, the parent from CHILD_OF only, the kind from the
 * `span.kind` tag, the service from the span's process. The real Jaeger's side is
 * test/tracing/jaeger.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { spansOf, type RawTrace } from '../services/jaeger/query.ts';

/** A hex id of `width` digits and the way Jaeger might print it (leading zeros dropped, any case). */
const id = (width: number) =>
  fc.tuple(fc.stringMatching(new RegExp(`^[0-9a-f]{${width}}$`)), fc.nat(width - 1), fc.boolean()).map(([full, cut, upper]) => {
    const stripped = full.replace(new RegExp(`^0{0,${cut}}`), '') || '0';
    return { full, printed: upper ? stripped.toUpperCase() : stripped };
  });

const spanArb = fc.record({
  spanId: id(16),
  parent: fc.option(fc.record({ spanId: id(16), refType: fc.constantFrom('CHILD_OF', 'FOLLOWS_FROM') }), { nil: undefined }),
  operationName: fc.string(),
  kind: fc.option(fc.constantFrom('client', 'server', 'producer', 'consumer', 'internal'), { nil: undefined }),
  tags: fc.dictionary(fc.string().filter((k) => k !== 'span.kind' && k !== '__proto__'), fc.oneof(fc.string(), fc.integer(), fc.boolean())),
  process: fc.constantFrom('p1', 'p2'),
});

describe('the Jaeger query API read into spans', () => {
  it('keeps ids at full width, the CHILD_OF parent, the kind, the tags and the service', () => {
    fc.assert(
      fc.property(id(32), fc.array(spanArb, { maxLength: 5 }), fc.string(), fc.string(), (traceId, spans, s1, s2) => {
        const trace: RawTrace = {
          traceID: traceId.printed,
          processes: { p1: { serviceName: s1 }, p2: { serviceName: s2 } },
          spans: spans.map((s) => ({
            traceID: traceId.printed,
            spanID: s.spanId.printed,
            operationName: s.operationName,
            references: s.parent ? [{ refType: s.parent.refType, traceID: traceId.printed, spanID: s.parent.spanId.printed }] : [],
            tags: [...Object.entries(s.tags).map(([key, value]) => ({ key, value })), ...(s.kind ? [{ key: 'span.kind', value: s.kind }] : [])],
            processID: s.process,
          })),
        };
        const got = spansOf([trace]);
        expect(got).toHaveLength(spans.length);
        got.forEach((g, i) => {
          const s = spans[i];
          expect(g.traceId).toBe(traceId.full);
          expect(g.spanId).toBe(s.spanId.full);
          expect(g.parentSpanId).toBe(s.parent?.refType === 'CHILD_OF' ? s.parent.spanId.full : undefined);
          expect(g.kind).toBe(s.kind);
          expect(g.serviceName).toBe(s.process === 'p1' ? s1 : s2);
          expect(g.operationName).toBe(s.operationName);
          expect(g.tags).toEqual({ ...s.tags, ...(s.kind ? { 'span.kind': s.kind } : {}) });
        });
      }),
    );
  });
});
