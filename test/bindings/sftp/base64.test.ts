/** Strict base64 check of `create` data: agrees with the RFC 4648 grammar on any input. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertBase64, DECODE_SLICE } from '../../../sidecar/src/components/bindings/sftp/base64.ts';
import { ApiError } from '../../../sidecar/src/http/errors.ts';

const accepts = (s: string) => {
  try {
    assertBase64(s);
    return true;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return false;
  }
};
/** The grammar: groups of 4 from the standard alphabet, the last may end in "=" or "==". */
const grammar = (s: string) => s.length % 4 === 0 && /^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s);

describe('assertBase64', () => {
  it('accepts exactly what the grammar accepts (near-miss alphabet)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'AQgw+/=-_ \n\r\tz9é\u0000😀'.split('')), maxLength: 40 }), (s) => accepts(s) === grammar(s)),
      { numRuns: 20_000 },
    );
  });

  it('accepts everything Buffer#toString("base64") produces', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (u) => accepts(Buffer.from(u).toString('base64'))));
  });

  it('checks every slice of a large input, not only the first', () => {
    const big = Buffer.alloc((DECODE_SLICE / 4) * 3 * 2 + 300, 1).toString('base64');
    expect(accepts(big)).toBe(true);
    for (const at of [DECODE_SLICE - 1, DECODE_SLICE, DECODE_SLICE + 7, big.length - 5]) {
      expect(accepts(big.slice(0, at) + '*' + big.slice(at + 1)), `bad character at ${at}`).toBe(false);
      expect(accepts(big.slice(0, at) + '=' + big.slice(at + 1)), `padding at ${at}`).toBe(false);
    }
  });
});
