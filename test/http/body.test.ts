/**
 * Request bodies on every endpoint that takes one (issue 17): JSON nested past the depth limit
 * is a 400 at parse time, Content-Encoding gzip/deflate/br is decoded and anything else is a
 * 415, bulk requests past their size are a 400, and a body that never arrives is cut off.
 * Properties run random bodies through every endpoint: never an internal 5xx, never a crash.
 */
import { connect } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, jsonTooDeep } from '../../sidecar/src/http/body.ts';
import { createHttpServer } from '../../sidecar/src/http/server.ts';
import { MAX_BULK_ITEMS } from '../../sidecar/src/state/service.ts';
import { startStateSidecar, type StateSidecar } from '../state/sidecar.ts';

/** Every endpoint that takes a body (POST /v1.0/shutdown aside: it stops the sidecar). */
const ENDPOINTS: { method: 'POST' | 'PUT'; path: string }[] = [
  { method: 'POST', path: '/v1.0/state/mem' },
  { method: 'POST', path: '/v1.0/state/lite' },
  { method: 'POST', path: '/v1.0/state/lite/bulk' },
  { method: 'POST', path: '/v1.0/state/mem/transaction' },
  { method: 'POST', path: '/v1.0/state/lite/transaction' },
  { method: 'POST', path: '/v1.0-alpha1/state/lite/query' },
  { method: 'POST', path: '/v1.0-alpha1/jobs/fuzz-job' },
  { method: 'POST', path: '/v1.0/bindings/none' },
  { method: 'PUT', path: '/v1.0/metadata/fuzz' },
  { method: 'POST', path: '/v1.0/workflows/dapr/fuzzflow/start' },
  { method: 'POST', path: '/v1.0/workflows/dapr/no-such-instance/raiseEvent/e' },
];

/** JSON holding `value` inside `depth` arrays/objects, the shape of each endpoint's body. */
function nested(depth: number, kind: 'array' | 'object' | 'mixed'): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    const obj = kind === 'object' || (kind === 'mixed' && i % 2 === 1);
    open += obj ? '{"a":' : '[';
    close = (obj ? '}' : ']') + close;
  }
  return `${open}1${close}`;
}

/** The body of each endpoint with `inner` where a value goes. */
function bodyFor(path: string, inner: string): string {
  if (path.endsWith('/bulk')) return `{"keys":["k"],"metadata":{},"x":${inner}}`;
  if (path.endsWith('/transaction')) return `{"operations":[{"operation":"upsert","request":{"key":"t","value":${inner}}}]}`;
  if (path.endsWith('/query')) return `{"filter":{"EQ":{"a":${inner}}}}`;
  if (path.includes('/jobs/')) return `{"dueTime":"1h","data":${inner}}`;
  if (path.includes('/bindings/')) return `{"operation":"create","data":${inner}}`;
  if (path.startsWith('/v1.0/state/')) return `[{"key":"k","value":${inner}}]`;
  return inner;
}

const encoders: Record<string, (b: Buffer) => Buffer> = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync };

let s: StateSidecar;
beforeAll(async () => {
  s = await startStateSidecar('body', [
    { name: 'mem', type: 'state.in-memory' },
    { name: 'lite', type: 'state.sqlite', metadata: { connectionString: ':memory:' } },
  ]);
});
afterAll(async () => {
  if (!s) return;
  expect((await fetch(`${s.base}/v1.0/healthz`)).status).toBe(204);
  await s.stop();
});

async function send(method: string, path: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<{ status: number; json: { errorCode?: string; message?: string } | undefined }> {
  const res = await fetch(`${s.base}${path}`, { method, body, headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json };
}

describe('JSON depth limit', () => {
  it('the scanner counts nesting outside strings only, escapes honoured', () => {
    expect(jsonTooDeep(nested(MAX_JSON_DEPTH, 'mixed'))).toBe(false);
    expect(jsonTooDeep(nested(MAX_JSON_DEPTH + 1, 'array'))).toBe(true);
    expect(jsonTooDeep(Buffer.from(nested(MAX_JSON_DEPTH + 1, 'object')))).toBe(true);
    const brackets = '['.repeat(5000);
    expect(jsonTooDeep(JSON.stringify({ s: brackets }))).toBe(false);
    expect(jsonTooDeep(JSON.stringify({ s: `\\"${brackets}` }))).toBe(false);
    expect(jsonTooDeep(`["\\\\"${'['.repeat(600)}`)).toBe(true);
  });

  it('answers 400 naming the limit for 5,000 levels on every endpoint that takes JSON, as JSON and as text', async () => {
    for (const e of ENDPOINTS) {
      for (const contentType of ['application/json', 'text/plain']) {
        const r = await send(e.method, e.path, bodyFor(e.path, nested(5000, 'mixed')), { 'content-type': contentType });
        // workflow input and raised events are stored as bytes, never parsed: any 2xx/4xx, no 5xx crash
        if (e.path.includes('/workflows/') || e.path.includes('/metadata/')) {
          expect(r.status, `${e.path} ${contentType}`).toBeLessThan(500);
          continue;
        }
        expect(r.status, `${e.path} ${contentType}: ${JSON.stringify(r.json)}`).toBe(400);
        // a binding's body streams to the binding, so an unknown one is refused before it is read
        if (e.path.endsWith('/bindings/none')) expect(r.json?.message).toMatch(new RegExp(`${MAX_JSON_DEPTH}|binding "none" is not loaded`));
        else expect(r.json?.message).toContain(String(MAX_JSON_DEPTH));
      }
    }
  });

  it('takes values nested up to the limit, and gives them back', async () => {
    const value = nested(MAX_JSON_DEPTH - 2, 'mixed');
    for (const store of ['mem', 'lite']) {
      expect((await send('POST', `/v1.0/state/${store}`, `[{"key":"deep","value":${value}}]`)).status).toBe(204);
      const got = await fetch(`${s.base}/v1.0/state/${store}/deep`);
      expect(got.status).toBe(200);
      expect(await got.text()).toBe(value);
    }
  });
});

describe('Content-Encoding', () => {
  it('decodes gzip, deflate and br bodies on JSON and raw endpoints', async () => {
    for (const [name, encode] of Object.entries(encoders)) {
      const body = encode(Buffer.from(JSON.stringify([{ key: `enc-${name}`, value: { via: name } }])));
      expect((await send('POST', '/v1.0/state/mem', body, { 'content-encoding': name })).status, name).toBe(204);
      expect(await (await fetch(`${s.base}/v1.0/state/mem/enc-${name}`)).json()).toEqual({ via: name });
      // the bindings reader and fastify's buffer parser get the decoded bytes too
      const b = await send('POST', '/v1.0/bindings/none', encode(Buffer.from('{"operation":"create"}')), { 'content-encoding': name, 'content-type': 'text/plain' });
      expect(b.json?.errorCode).toBe('ERR_BINDING_NOT_FOUND');
    }
  });

  it('answers 415 for an encoding it cannot decode, 400 for a body that is not what it says', async () => {
    const plain = JSON.stringify([{ key: 'x', value: 1 }]);
    const unknown = await send('POST', '/v1.0/state/mem', plain, { 'content-encoding': 'compress' });
    expect(unknown.status).toBe(415);
    expect(unknown.json?.errorCode).toBe('ERR_UNSUPPORTED_MEDIA_TYPE');
    const lying = await send('POST', '/v1.0/state/mem', plain, { 'content-encoding': 'gzip' });
    expect(lying.status).toBe(400);
    expect(lying.json?.message).toMatch(/gzip/);
  });

  it('counts decoded bytes against the body limit (a small bomb is a 413)', async () => {
    const bomb = gzipSync(Buffer.from(`[{"key":"b","value":"${'a'.repeat(20 * 1024 * 1024)}"}]`));
    expect(bomb.length).toBeLessThan(100 * 1024);
    const r = await send('POST', '/v1.0/state/mem', bomb, { 'content-encoding': 'gzip' });
    expect(r.status).toBe(413);
  });
});

describe('bulk sizes', () => {
  it(`answers 400 past ${MAX_BULK_ITEMS} keys, items or operations, and takes exactly that many`, async () => {
    const keys = (n: number) => JSON.stringify({ keys: Array.from({ length: n }, (_, i) => `k${i}`) });
    const over = await send('POST', '/v1.0/state/lite/bulk', keys(MAX_BULK_ITEMS + 1));
    expect(over.status).toBe(400);
    expect(over.json?.message).toContain(String(MAX_BULK_ITEMS));
    expect((await send('POST', '/v1.0/state/lite/bulk', keys(MAX_BULK_ITEMS))).status).toBe(200);
    const items = JSON.stringify(Array.from({ length: MAX_BULK_ITEMS + 1 }, (_, i) => ({ key: `i${i}`, value: i })));
    expect((await send('POST', '/v1.0/state/lite', items)).status).toBe(400);
    const ops = JSON.stringify({ operations: Array.from({ length: MAX_BULK_ITEMS + 1 }, (_, i) => ({ operation: 'delete', request: { key: `i${i}` } })) });
    expect((await send('POST', '/v1.0/state/lite/transaction', ops)).status).toBe(400);
  });
});

describe('request bodies: properties over every endpoint', () => {
  const depth = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: MAX_JSON_DEPTH - 2, max: MAX_JSON_DEPTH + 2 }), fc.integer({ min: 4990, max: 5010 }));
  const inner = fc.oneof(
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null'),
    fc.tuple(depth, fc.constantFrom('array', 'object', 'mixed') as fc.Arbitrary<'array' | 'object' | 'mixed'>).map(([d, k]) => nested(d, k)),
  );
  const encoding = fc.constantFrom(undefined, undefined, 'gzip', 'deflate', 'br', 'identity', 'compress', 'gzip, br');

  it('answers 2xx/4xx JSON (or a chosen 5xx code), 400 for JSON too deep, 415 for an unknown encoding', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ENDPOINTS), inner, encoding, fc.constantFrom('application/json', 'text/plain'), async (e, value, enc, contentType) => {
        const text = bodyFor(e.path, value);
        const headers: Record<string, string> = { 'content-type': contentType };
        let body: Buffer = Buffer.from(text);
        if (enc) {
          headers['content-encoding'] = enc;
          if (encoders[enc]) body = encoders[enc](body);
        }
        const r = await send(e.method, e.path, body, headers);
        const where = `${e.method} ${e.path} ${enc ?? ''} ${contentType} → ${r.status} ${JSON.stringify(r.json)?.slice(0, 200)}`;
        if (enc && enc !== 'identity' && !encoders[enc]) {
          expect(r.status, where).toBe(415);
          return;
        }
        if (r.status >= 400) {
          expect(typeof r.json?.errorCode, where).toBe('string');
          expect(r.json?.message ?? '', where).not.toMatch(/call stack|too large to be represented/i);
        }
        if (r.status >= 500) expect(r.json?.errorCode, where).not.toBe('ERR_INTERNAL');
        const parsed = !e.path.includes('/workflows/') && !e.path.includes('/metadata/');
        if (parsed && jsonTooDeep(text)) expect(r.status, where).toBe(400);
      }),
      { numRuns: 150 },
    );
  });
});

describe('request timeout', () => {
  it('answers 408 and closes a connection whose declared body never arrives', async () => {
    const app = createHttpServer({ log: pino({ level: 'silent' }), bodyLimit: 1024 * 1024, requestTimeoutMs: 1000 });
    app.post('/echo', async (req) => req.body);
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      const started = Date.now();
      const answer = await new Promise<string>((resolve, reject) => {
        const sock = connect(port, '127.0.0.1', () => {
          sock.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":');
        });
        let got = '';
        sock.on('data', (c) => (got += c.toString()));
        sock.on('close', () => resolve(got));
        sock.on('error', reject);
        setTimeout(() => {
          sock.destroy();
          reject(new Error(`still open after 10 s: ${got}`));
        }, 10_000);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
      expect(Date.now() - started).toBeLessThan(4000);
    } finally {
      await app.close();
    }
  });
});
