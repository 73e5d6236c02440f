/**
 * The streaming reader of binding bodies (stream-body.ts) against JSON.parse, over bodies cut
 * into random pieces: what it streams and parses is what JSON.parse makes of the whole body.
 */
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodySource, readHead } from '../../sidecar/src/bindings/stream-body.ts';

/** Cuts `body` at the given points into a request-like stream. */
function pieces(body: Buffer, cuts: number[]): Readable {
  const at = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const c of [...at, body.length]) {
    if (c > from) parts.push(body.subarray(from, c));
    from = Math.max(from, c);
  }
  return Readable.from(parts);
}

async function read(body: Buffer, cuts: number[], headers: Record<string, string> = {}) {
  const src = new BodySource(pieces(body, cuts), headers, 1 << 20);
  const head = await readHead(src);
  if (head.kind === 'whole') return { kind: 'whole' as const, body: head.body.toString() };
  const chunks: Buffer[] = [];
  for await (const c of head.reader.chunks()) chunks.push(Buffer.from(c));
  const tail = await head.reader.rest();
  return { kind: 'data' as const, value: { ...head.members, data: Buffer.concat(chunks).toString('utf8'), ...tail } };
}

const memberName = fc.constantFrom('operation', 'metadata', 'x', '__proto__', 'd\\"x', 'dätä');
const jsonValue = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }), fc.array(fc.integer(), { maxLength: 3 }));
const dataString = fc.string({ unit: fc.constantFrom('A', 'z', '+', '/', '=', '"', '\\', 'é', '\n', '😀', '\u0001'), maxLength: 60 });

describe('streamed binding bodies', () => {
  it('stream exactly what JSON.parse reads, however the body is cut (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(memberName, jsonValue), { maxLength: 3 }),
        dataString,
        fc.array(fc.tuple(fc.constantFrom('metadata', 'y'), jsonValue), { maxLength: 2 }),
        fc.array(fc.nat(400), { maxLength: 8 }),
        fc.constantFrom('', ' ', '\n\t'),
        async (before, data, after, cuts, ws) => {
          const member = ([k, v]: [string, unknown]) => `${JSON.stringify(k)}${ws}:${ws}${JSON.stringify(v)}`;
          const text = `${ws}{${[...before.map(member), `"data":${ws}${JSON.stringify(data)}`, ...after.map(member)].join(`,${ws}`)}}${ws}`;
          const got = await read(Buffer.from(text), cuts);
          expect(got.kind).toBe('data');
          if (got.kind === 'data') expect(got.value).toEqual(JSON.parse(text));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('escapes in data are decoded across piece boundaries', async () => {
    const text = '{"operation":"create","data":"ab\\/cd\\u0041\\n\\"x\\\\","metadata":{"fileName":"f"}}';
    for (let cut = 0; cut <= text.length; cut++) {
      const got = await read(Buffer.from(text), [cut, cut + 1, cut + 3]);
      expect(got).toEqual({ kind: 'data', value: JSON.parse(text) });
    }
  });

  it('hands bodies without a string data, or not objects, back whole', async () => {
    for (const text of ['{"operation":"get","metadata":{"fileName":"x"}}', '{"data":{"a":1}}', '[1,2]', '"data"', '{"operation":1 2}', '']) {
      expect(await read(Buffer.from(text), [3, 7])).toEqual({ kind: 'whole', body: text });
    }
  });

  it('rejects with 400 a tail that is not JSON, a repeated data or operation, a body ending in data', async () => {
    for (const [text, message] of [
      ['{"operation":"create","data":"QQ==","metadata":{', /not valid JSON/],
      ['{"operation":"create","data":"QQ==" x', /not valid JSON/],
      ['{"operation":"create","data":"QQ==","data":"QQ=="}', /"data" appears twice/],
      ['{"operation":"create","data":"QQ==","operation":"get"}', /"operation" appears twice/],
      ['{"operation":"create","data":"QQ==', /ends inside the "data" string/],
      ['{"operation":"create","data":"Q\\x"}', /bad escape/],
      ['{"operation":"create","data":"Q\\u00zz"}', /bad escape/],
    ] as const) {
      await expect(read(Buffer.from(text), [10, 31]), text).rejects.toMatchObject({ status: 400, message: expect.stringMatching(message) });
    }
  });

  it('checks the size limit and Content-Length', async () => {
    const body = Buffer.from('{"operation":"create","data":"QUFB"}');
    await expect(read(body, [5], { 'content-length': String(body.length + 5) })).rejects.toMatchObject({ status: 400 });
    const big = () => new BodySource(Readable.from([body, body]), {}, body.length + 1);
    await expect((async () => readHead(big()).then(async (h) => h.kind === 'data' && h.reader.rest()))()).rejects.toMatchObject({ status: 413 });
    await expect(new BodySource(Readable.from([body]), { 'content-length': '99999999' }, 100).next()).rejects.toMatchObject({ status: 413 });
  });
});
