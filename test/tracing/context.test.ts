/** The W3C traceparent reader and writer: every valid header round-trips, everything else is absent. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTraceParent, isSampled, keepTraceState, parseTraceParent } from '../../sidecar/src/tracing/context.ts';

const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
const valid = fc.record({ traceId: hex(32).filter((s) => !/^0+$/.test(s)), spanId: hex(16).filter((s) => !/^0+$/.test(s)), flags: fc.integer({ min: 0, max: 255 }) });

describe('traceparent', () => {
  it('reads the spec example', () => {
    expect(parseTraceParent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')).toEqual({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', flags: 1 });
  });

  it('round-trips every valid context', () => {
    fc.assert(
      fc.property(valid, (p) => {
        const text = formatTraceParent(p);
        expect(text).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);
        expect(parseTraceParent(text)).toEqual(p);
        expect(isSampled(p)).toBe((p.flags & 1) === 1);
      }),
    );
  });

  it('any string that is not a valid version-00 header is absent, never a throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 60 }), fc.stringMatching(/^0[0-9a-fA-F-]{53,55}$/), fc.constantFrom('', '00', '00-' + 'x'.repeat(52))), (s) => {
        const got = parseTraceParent(s);
        if (got) expect(formatTraceParent(got)).toBe(s);
      }),
    );
  });

  it('refuses all-zero ids, uppercase hex, other versions, wrong lengths and non-strings', () => {
    const id = '0af7651916cd43dd8448eb211c80319c';
    const span = 'b7ad6b7169203331';
    for (const bad of [
      `00-${'0'.repeat(32)}-${span}-01`,
      `00-${id}-${'0'.repeat(16)}-01`,
      `00-${id.toUpperCase()}-${span}-01`,
      `01-${id}-${span}-01`,
      `ff-${id}-${span}-01`,
      `00-${id}-${span}-1`,
      `00-${id}-${span}-01-`,
      ` 00-${id}-${span}-01`,
      `00_${id}_${span}_01`,
      undefined,
      42,
      [`00-${id}-${span}-01`],
    ]) {
      expect(parseTraceParent(bad)).toBeUndefined();
    }
  });

  it('a mutated valid header is either still valid and consistent or absent', () => {
    fc.assert(
      fc.property(valid, fc.nat(54), fc.string({ minLength: 1, maxLength: 1 }), (p, at, c) => {
        const text = formatTraceParent(p);
        const mutated = text.slice(0, at) + c + text.slice(at + 1);
        const got = parseTraceParent(mutated);
        if (got) expect(formatTraceParent(got)).toBe(mutated);
      }),
    );
  });
});

describe('tracestate', () => {
  it('is kept as given, repeated headers joined, too long or unprintable dropped', () => {
    expect(keepTraceState('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')).toBe('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    expect(keepTraceState(['a=1', 'b=2'])).toBe('a=1,b=2');
    expect(keepTraceState('a=' + 'x'.repeat(600))).toBeUndefined();
    expect(keepTraceState('a=1\nb=2')).toBeUndefined();
    expect(keepTraceState(undefined)).toBeUndefined();
  });
});
