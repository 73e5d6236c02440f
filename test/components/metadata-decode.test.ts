/**
 * The one component-metadata decoder (components/metadata/decode.ts): its rules, as properties
 * over generated input (booleans, durations and integers round-trip; any input decodes or gives a
 * MetadataError naming the field and the value, never anything else).
 */
import fc from 'fast-check';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { decodeMetadata, defineMetadata, MetadataError, presentFields } from '../../sidecar/src/components/metadata/decode.ts';
import { formatDuration } from '../../shared/duration.ts';

const DECL = defineMetadata('test.component', {
  name: { type: 'string', required: true, aliases: ['legacyName'] },
  password: { type: 'string', secret: true },
  flag: { type: 'boolean', default: false },
  maybe: { type: 'boolean' },
  timeout: { type: 'duration', default: 5000, min: 0, max: 3_600_000 },
  count: { type: 'integer', default: 10, min: 1, max: 1000 },
  mode: { type: 'enum', values: ['fast', 'Safe'], default: 'fast' },
  sides: { type: 'list', values: ['input', 'output'] },
  tags: { type: 'list', default: ['a'] },
});
const decode = (md: Record<string, string>) => decodeMetadata(DECL, { name: 'n', ...md });

/** The error a decode throws (fails the test when it does not throw one). */
function errorOf(fn: () => unknown): MetadataError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(MetadataError);
    return e as MetadataError;
  }
  throw new Error('expected a MetadataError');
}

/** A text in random letter case with random surrounding whitespace. */
const spelled = (words: string[]) =>
  fc.tuple(fc.constantFrom(...words), fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }), fc.constantFrom('', ' ', '\t', ' \n')).map(([w, up, ws]) => ws + [...w].map((c, i) => (up[i] ? c.toUpperCase() : c)).join('') + ws);

const TRUE = ['true', 't', '1', 'yes', 'y', 'on'];
const FALSE = ['false', 'f', '0', 'no', 'n', 'off'];

describe('component metadata decoder', () => {
  it('types the result from the declaration', () => {
    const md = decode({});
    expectTypeOf(md.name).toEqualTypeOf<string>();
    expectTypeOf(md.password).toEqualTypeOf<string | undefined>();
    expectTypeOf(md.flag).toEqualTypeOf<boolean>();
    expectTypeOf(md.maybe).toEqualTypeOf<boolean | undefined>();
    expectTypeOf(md.timeout).toEqualTypeOf<number>();
    expectTypeOf(md.mode).toEqualTypeOf<'fast' | 'Safe'>();
    expectTypeOf(md.sides).toEqualTypeOf<('input' | 'output')[] | undefined>();
    expectTypeOf(md.tags).toEqualTypeOf<string[]>();
    expect(md).toEqual({ name: 'n', password: undefined, flag: false, maybe: undefined, timeout: 5000, count: 10, mode: 'fast', sides: undefined, tags: ['a'] });
  });

  it('reads booleans as Go ParseBool and dapr/kit IsTruthy do, any case; empty is the default', () => {
    fc.assert(
      fc.property(spelled(TRUE), spelled(FALSE), (t, f) => {
        expect(decode({ flag: t, maybe: f })).toMatchObject({ flag: true, maybe: false });
        expect(decode({ flag: f, maybe: t })).toMatchObject({ flag: false, maybe: true });
      }),
    );
    for (const blank of ['', ' ', '\t']) expect(decode({ flag: blank, maybe: blank })).toMatchObject({ flag: false, maybe: undefined });
  });

  it('refuses any other boolean text with an error naming the field and the value', () => {
    const accepted = new Set([...TRUE, ...FALSE]);
    fc.assert(
      fc.property(
        fc.string().filter((s) => s.trim() !== '' && !accepted.has(s.trim().toLowerCase())),
        (v) => {
          const e = errorOf(() => decode({ flag: v }));
          expect(e.field).toBe('flag');
          expect(e.message).toContain('metadata field "flag"');
          expect(e.message).toContain(JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v));
          expect(e.message).toMatch(/is not a boolean/);
        },
      ),
    );
  });

  it('reads durations as Go durations or a bare number of seconds, and they round-trip', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_600_000 }), (ms) => {
        expect(decode({ timeout: formatDuration(ms) }).timeout).toBe(ms);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3600 }), fc.constantFrom('', '+', ' '), (s, pre) => {
        expect(decode({ timeout: `${pre}${s}` }).timeout).toBe(s * 1000);
      }),
    );
    expect(decode({ timeout: '1m30s' }).timeout).toBe(90_000);
    expect(decode({ timeout: '30' }).timeout).toBe(30_000);
    expect(decode({ timeout: '1.5s' }).timeout).toBe(1500);
    expect(errorOf(() => decode({ timeout: '-1s' })).message).toBe('metadata field "timeout" "-1s" is out of range: from 0s to 1h0m');
    expect(errorOf(() => decode({ timeout: '2h' })).message).toMatch(/out of range/);
    for (const bad of ['soon', '1.5', '5 s', '1d', 's', '--1s', '0x10']) {
      expect(errorOf(() => decode({ timeout: bad })).message).toBe(
        `metadata field "timeout" ${JSON.stringify(bad)} is not a duration: use a Go duration such as 30s, 1m30s or 500ms, or a whole number of seconds`,
      );
    }
  });

  it('reads integers as decimal digits with a sign, within the declared range, and they round-trip', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.constantFrom('', ' ', '+'), (n, pre) => {
        expect(decode({ count: `${pre}${n}` }).count).toBe(n);
      }),
    );
    fc.assert(
      fc.property(fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 1001 })), (n) => {
        expect(errorOf(() => decode({ count: String(n) })).message).toBe(`metadata field "count" "${n}" is out of range: from 1 to 1000`);
      }),
    );
    for (const bad of ['1.5', '1e3', '0x10', 'ten', '1_000', '99999999999999999999']) expect(errorOf(() => decode({ count: bad })).field).toBe('count');
  });

  it('reads enums and lists in any case, as declared', () => {
    expect(decode({ mode: ' SAFE ' }).mode).toBe('Safe');
    expect(errorOf(() => decode({ mode: 'slow' })).message).toBe('metadata field "mode" "slow" is not one of "fast", "Safe"');
    expect(decode({ sides: 'Output, input,' }).sides).toEqual(['output', 'input']);
    expect(decode({ tags: ' x ,, y' }).tags).toEqual(['x', 'y']);
    expect(errorOf(() => decode({ sides: 'input, sideways' })).field).toBe('sides');
  });

  it('matches names in any case: the declared spelling first, then others, then aliases; a blank value hides nothing', () => {
    expect(decodeMetadata(DECL, { NAME: 'a' }).name).toBe('a');
    expect(decodeMetadata(DECL, { NAME: 'a', name: 'b' }).name).toBe('b');
    expect(decodeMetadata(DECL, { legacyname: 'old', Name: 'new' }).name).toBe('new');
    expect(decodeMetadata(DECL, { legacyName: 'old' }).name).toBe('old');
    expect(decodeMetadata(DECL, { name: ' ', legacyName: 'old' }).name).toBe('old');
    expect(decodeMetadata(DECL, { name: 'x', FLAG: 'yes', Timeout: '2s' })).toMatchObject({ flag: true, timeout: 2000 });
    expect([...presentFields(DECL, { LEGACYNAME: 'x', flag: '', other: '1' })]).toEqual(['name']);
  });

  it('names the key as it was written, and the declared field in MetadataError.field', () => {
    const e = errorOf(() => decodeMetadata(DECL, { legacyName: 'x', FLAG: 'maybe' }));
    expect(e.field).toBe('flag');
    expect(e.message).toMatch(/^metadata field "FLAG" "maybe" is not a boolean/);
    const alias = defineMetadata('t', { timeout: { type: 'duration', aliases: ['timeoutInSeconds'] } });
    expect(errorOf(() => decodeMetadata(alias, { timeoutInSeconds: '0.5' })).message).toMatch(/^metadata field "timeoutInSeconds" "0\.5" is not a duration/);
  });

  it('names every missing required field at once, and leaves undeclared keys alone', () => {
    expect(errorOf(() => decodeMetadata(DECL, {})).message).toBe('metadata field "name" is required');
    const two = defineMetadata('t', { a: { type: 'string', required: true }, b: { type: 'integer', required: true, doc: 'x' } });
    expect(errorOf(() => decodeMetadata(two, { b: ' ' })).message).toBe('metadata fields "a", "b" are required');
    expect(errorOf(() => decodeMetadata(two, { a: 'x' })).message).toBe('metadata field "b" is required (x)');
    expect(decodeMetadata(two, { a: 'x', b: '1', unknown: 'kept out' })).toEqual({ a: 'x', b: 1 });
  });

  it('never shows a secret field\'s value', () => {
    const d = defineMetadata('t', { key: { type: 'integer', secret: true } });
    const e = errorOf(() => decodeMetadata(d, { key: 'hunter2' }));
    expect(e.message).toBe('metadata field "key" (a secret value, not shown) is not a whole number');
  });

  it('decodes any metadata into the declared types or a MetadataError, never anything else', () => {
    const keys = ['name', 'NAME', 'legacyName', 'password', 'flag', 'maybe', 'timeout', 'Count', 'mode', 'sides', 'tags', 'other', '__proto__', 'constructor'];
    const value = fc.oneof(fc.string(), fc.constantFrom('true', 'off', '30', '1m', '-5', '', ' ', 'fast', 'input,output', '1e3'));
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...keys), value), (md) => {
        let r: ReturnType<typeof decode>;
        try {
          r = decodeMetadata(DECL, md);
        } catch (e) {
          expect(e).toBeInstanceOf(MetadataError);
          expect(Object.keys(DECL.fields)).toContain((e as MetadataError).field);
          return;
        }
        expect(typeof r.name).toBe('string');
        expect(typeof r.flag).toBe('boolean');
        expect(Number.isFinite(r.timeout) && r.timeout >= 0 && r.timeout <= 3_600_000).toBe(true);
        expect(Number.isInteger(r.count) && r.count >= 1 && r.count <= 1000).toBe(true);
        expect(['fast', 'Safe']).toContain(r.mode);
        expect(Object.keys(r).sort()).toEqual(Object.keys(DECL.fields).sort());
      }),
      { numRuns: 2000 },
    );
  });
});
