/**
 * The generic output-binding route and its low-copy body reader: the parsed body is exactly
 * JSON.parse's (property-tested), whatever the Content-Type, and errors are 4xx JSON.
 * The route is driven through a real sidecar with a small recording binding.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fastObject, parseJsonBody, readBody } from '../../sidecar/src/bindings/body.ts';
import { builtinCatalog } from '../../sidecar/src/components/catalog.ts';
import type { BindingRequest, BindingResponse, OutputBinding } from '../../sidecar/src/components/types.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

const ws = fc.constantFrom('', ' ', '\n', '\t', '\r\n', '  ');

/** JSON text of an object with random whitespace between tokens (keys and values from fast-check). */
const objectText = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom('operation', 'data', 'metadata', '__proto__', 'a"b', 'é'), fc.string()), fc.jsonValue(), ws, ws, ws), { maxLength: 6 })
  .chain((members) =>
    fc.tuple(ws, ws).map(([w1, w2]) => `${w1}{${members.map(([k, v, a, b, c]) => `${a}${JSON.stringify(k)}${b}:${c}${JSON.stringify(v)}`).join(',')}}${w2}`),
  );

/** Strings that exercise the raw path: plain, escaped, unicode, control characters. */
const bigString = fc.oneof(
  fc.string({ minLength: 0, maxLength: 300 }),
  fc.string({ unit: 'grapheme', maxLength: 100 }),
  fc.string({ unit: fc.constantFrom('A', '/', '+', '=', '\\', '"', '\n', '\u0001', 'é', '😀', '\u2028'), maxLength: 200 }),
);

describe('binding body parser', () => {
  it('fastObject gives exactly what JSON.parse gives, or declines', () => {
    fc.assert(
      fc.property(objectText, fc.integer({ min: 0, max: 8 }), (text, rawMin) => {
        const buf = Buffer.from(text, 'utf8');
        const fast = fastObject(buf, 0, rawMin);
        if (fast !== undefined) expect(fast).toStrictEqual(JSON.parse(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('takes long string members from the buffer exactly as JSON.parse decodes them', () => {
    fc.assert(
      fc.property(bigString, fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }), (data, metadata) => {
        const text = JSON.stringify({ operation: 'create', data, metadata });
        // a raw (unescaped) control character is invalid JSON: the fast path must not accept it
        const raw = text.replace('\\u0001', '\u0001');
        for (const t of [text, raw]) {
          const fast = fastObject(Buffer.from(t), 0, 0);
          let expected: unknown;
          try {
            expected = JSON.parse(t);
          } catch {
            expect(fast).toBeUndefined();
            continue;
          }
          if (fast !== undefined) expect(fast).toStrictEqual(expected);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('declines (so JSON.parse decides) on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('{', '}', '"', ':', ',', 'a', '1', ' ', '\\', '[', ']', 'n', 'u', 'l') }), (text) => {
        const fast = fastObject(Buffer.from(text), 0, 0);
        if (fast !== undefined) expect(fast).toStrictEqual(JSON.parse(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('parses large bodies (fast path) and reports bad JSON as a 400', () => {
    const data = 'QUJD'.repeat(100_000);
    expect(parseJsonBody(Buffer.from(`\ufeff{"operation":"create","data":"${data}","metadata":{"fileName":"x"}}`))).toEqual({ operation: 'create', data, metadata: { fileName: 'x' } });
    for (const bad of ['{"operation":', `{"data":"${data}"`, `{"data":"${data}\u0001"}`, 'nope']) {
      const e = (() => {
        try {
          parseJsonBody(Buffer.from(bad));
        } catch (x) {
          return x;
        }
      })();
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).status).toBe(400);
      expect((e as ApiError).message).toMatch(/not valid JSON/);
    }
  });

  it('reads a body into one buffer, with or without Content-Length, and refuses one over the limit', async () => {
    const chunks = [Buffer.from('hello '), Buffer.from('world')];
    expect((await readBody(Readable.from(chunks), { 'content-length': '11' }, 100)).toString()).toBe('hello world');
    expect((await readBody(Readable.from(chunks), {}, 100)).toString()).toBe('hello world');
    await expect(readBody(Readable.from(chunks), { 'content-length': '1000' }, 100)).rejects.toMatchObject({ status: 413 });
    await expect(readBody(Readable.from(chunks), {}, 5)).rejects.toMatchObject({ status: 413 });
    await expect(readBody(Readable.from(chunks), { 'content-length': '20' }, 100)).rejects.toMatchObject({ status: 400 });
  });
});

/** Records what the route hands over and answers what the test asks for. */
class RecordingBinding implements OutputBinding {
  last: BindingRequest | undefined;
  async init(): Promise<void> {}
  capabilities(): string[] {
    return ['OUTPUT_BINDING'];
  }
  operations(): string[] {
    return ['echo', 'stream', 'nothing', 'fail'];
  }
  async close(): Promise<void> {}
  async invoke(req: BindingRequest): Promise<BindingResponse> {
    this.last = req;
    switch (req.operation) {
      case 'echo':
        return { data: Buffer.from(JSON.stringify(req)), contentType: 'application/json', metadata: { seen: 'yes' } };
      case 'stream': {
        const p = new PassThrough();
        p.end(Buffer.alloc(3 * 1024 * 1024, 7));
        return { data: p, contentType: 'application/octet-stream' };
      }
      case 'nothing':
        return {};
      default:
        throw new Error('the component failed');
    }
  }
}

describe('POST /v1.0/bindings/<name> (real sidecar, recording binding)', () => {
  let sidecar: Sidecar;
  let base: string;
  let dir: string;
  const binding = new RecordingBinding();

  beforeAll(async () => {
    const catalog = builtinCatalog();
    catalog.add('bindings.recording', { category: 'bindings', load: async () => () => binding });
    dir = await mkdtemp(join(tmpdir(), 'rt-routes-'));
    await writeFile(join(dir, 'rec.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: rec\nspec:\n  type: bindings.recording\n  version: v1\n  metadata: []\n');
    sidecar = await startSidecar({ appId: 'routes', httpPort: 0, grpcPort: 0, resourcesPaths: [dir], catalog, logger: pino({ level: 'silent' }) });
    base = `http://127.0.0.1:${sidecar.httpPort}/v1.0/bindings`;
  });
  afterAll(async () => {
    await sidecar?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const post = (body: string | Buffer, headers: Record<string, string> = {}, name = 'rec') => fetch(`${base}/${name}`, { method: 'POST', body, headers });

  it('hands the binding data exactly as JSON.parse reads it, for any JSON data and string metadata', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.dictionary(fc.string(), fc.string(), { maxKeys: 4 }), async (data, metadata) => {
        const res = await post(JSON.stringify({ operation: 'echo', data, metadata }), { 'content-type': 'application/json' });
        expect(res.status).toBe(200);
        expect(res.headers.get('metadata.seen')).toBe('yes');
        const expected = JSON.parse(JSON.stringify({ data, metadata }));
        expect(binding.last?.data).toStrictEqual(expected.data);
        expect({ ...binding.last?.metadata }).toStrictEqual(expected.metadata);
      }),
      { numRuns: 60 },
    );
  });

  it('reads a large body (the fast path) whatever the Content-Type, chunked or not', async () => {
    const data = Buffer.alloc(2 * 1024 * 1024, 9).toString('base64');
    const body = JSON.stringify({ operation: 'echo', data, metadata: { fileName: 'f' } });
    for (const headers of [{ 'content-type': 'application/json' }, { 'content-type': 'text/plain' }, {}] as Record<string, string>[]) {
      const res = await post(body, headers);
      expect(res.status).toBe(200);
      expect(binding.last?.data).toBe(data);
    }
    const chunked = await fetch(`${base}/rec`, { method: 'POST', body: Readable.toWeb(Readable.from([body.slice(0, 1000), body.slice(1000)])) as ReadableStream, duplex: 'half' } as RequestInit);
    expect(chunked.status).toBe(200);
    expect(binding.last?.data).toBe(data);
  });

  it('keeps a "__proto__" metadata key a plain entry', async () => {
    const res = await post('{"operation":"echo","metadata":{"__proto__":"x","fileName":"y"}}');
    expect(res.status).toBe(200);
    expect(Object.keys(binding.last!.metadata).sort()).toEqual(['__proto__', 'fileName']);
    expect(Object.getPrototypeOf(binding.last!.metadata)).toBe(Object.prototype);
  });

  it('streams Readable responses and answers 204 for no data', async () => {
    const res = await post('{"operation":"stream"}');
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.alloc(3 * 1024 * 1024, 7))).toBe(true);
    expect((await post('{"operation":"nothing"}')).status).toBe(204);
  });

  it('answers every malformed request with a 4xx JSON error, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string(), fc.json(), fc.jsonValue().map((v) => JSON.stringify({ operation: v, metadata: v }))), async (body) => {
        const res = await post(body, { 'content-type': 'application/json' });
        const err = res.status === 200 || res.status === 204 ? undefined : ((await res.json()) as { errorCode: string });
        if (res.status >= 400) {
          expect(res.status).toBeLessThan(500);
          expect(err?.errorCode).toMatch(/^ERR_/);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('is behind the API token like every other route', async () => {
    const token = 'route-test-token-0123456789';
    const guarded = await startSidecar({ appId: 'routes-token', httpPort: 0, grpcPort: 0, apiToken: token, logger: pino({ level: 'silent' }) });
    try {
      const url = `http://127.0.0.1:${guarded.httpPort}/v1.0/bindings/any`;
      const body = '{"operation":"get"}';
      expect((await fetch(url, { method: 'POST', body })).status).toBe(401);
      expect((await fetch(url, { method: 'POST', body, headers: { 'rt-api-token': 'wrong' } })).status).toBe(401);
      // with the token, the request reaches the route (which knows no binding "any")
      const ok = await fetch(url, { method: 'POST', body, headers: { 'rt-api-token': token } });
      expect(ok.status).toBe(400);
      expect(((await ok.json()) as { errorCode: string }).errorCode).toBe('ERR_BINDING_NOT_FOUND');
    } finally {
      await guarded.close();
    }
  });

  it('names the loaded bindings for an unknown one, the operations for an unknown operation; component errors are 500', async () => {
    let res = await post('{"operation":"echo"}', {}, 'nope');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ errorCode: 'ERR_BINDING_NOT_FOUND', message: expect.stringContaining('loaded bindings: rec') });
    res = await post('{"operation":"jump"}');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/supported: echo, stream, nothing, fail/);
    res = await post('{"operation":"fail"}');
    expect(res.status).toBe(500);
    expect(await res.json()).toMatchObject({ errorCode: 'ERR_INVOKE_OUTPUT_BINDING', message: 'error invoking output binding "rec": the component failed' });
  });
});
