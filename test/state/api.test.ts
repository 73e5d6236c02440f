/** The state HTTP API through a real sidecar: shapes, statuses, key prefixes, etags, TTL. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { builtinCatalog } from '../../sidecar/src/components/catalog.ts';
import type { StateStore } from '../../sidecar/src/components/types.ts';
import { startStateSidecar, type StateSidecar } from './sidecar.ts';

let s: StateSidecar;
const url = (p: string) => `${s.base}/v1.0/state/${p}`;
const post = (p: string, body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(url(p), { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
/** A JSON answer, loosely typed for assertions. */
const jsonOf = async (r: Response): Promise<any> => r.json();
const direct = (name: string) => s.sidecar.ctx.components.stateStore(name) as StateStore;
const stored = async (name: string, key: string) => {
  const v = (await direct(name).get(key))?.value;
  return v === undefined ? undefined : Buffer.from(v).toString();
};

beforeAll(async () => {
  s = await startStateSidecar('app1', [
    { name: 'mem', type: 'state.in-memory' },
    { name: 'lite', type: 'state.sqlite', metadata: { connectionString: ':memory:' } },
    { name: 'plain', type: 'state.in-memory', metadata: { keyPrefix: 'none' } },
    { name: 'byname', type: 'state.in-memory', metadata: { keyPrefix: 'name' } },
    { name: 'byns', type: 'state.in-memory', metadata: { keyPrefix: 'namespace' } },
    { name: 'custom', type: 'state.in-memory', metadata: { keyPrefix: 'shared' } },
  ]);
});
afterAll(async () => s?.stop());

describe('state API: save and get', () => {
  it('stores JSON values as their JSON text and returns them as stored, with an ETag', async () => {
    const r = await post('mem', [
      { key: 'obj', value: { a: 1, b: [true, null, 'x'] } },
      { key: 'str', value: 'abc' },
      { key: 'num', value: 42 },
    ]);
    expect(r.status).toBe(204);
    const g = await fetch(url('mem/obj'));
    expect(g.status).toBe(200);
    expect(g.headers.get('content-type')).toMatch(/application\/json/);
    expect(g.headers.get('etag')).toMatch(/^\d+$/);
    expect(await jsonOf(g)).toEqual({ a: 1, b: [true, null, 'x'] });
    expect(await (await fetch(url('mem/str'))).text()).toBe('"abc"');
    expect(await (await fetch(url('mem/num'))).text()).toBe('42');
  });

  it('answers 204 with no body for a missing key', async () => {
    const g = await fetch(url('mem/nothing-here'));
    expect(g.status).toBe(204);
    expect(await g.text()).toBe('');
  });

  it('accepts a JSON body without a JSON content type', async () => {
    expect((await post('mem', [{ key: 'ct', value: 1 }], { 'content-type': 'text/plain' })).status).toBe(204);
    expect((await post('mem', [{ key: 'ct2', value: 2 }], {})).status).toBe(204);
    expect(await (await fetch(url('mem/ct2'))).text()).toBe('2');
  });

  it('saves to SQLite the same way', async () => {
    expect((await post('lite', [{ key: 'k', value: { deep: { x: 'é' } } }])).status).toBe(204);
    expect(await (await fetch(url('lite/k'))).json()).toEqual({ deep: { x: 'é' } });
  });
});

describe('state API: key prefixes', () => {
  it('prefixes keys with the app id by default, and as keyPrefix says otherwise', async () => {
    for (const name of ['mem', 'plain', 'byname', 'byns', 'custom']) expect((await post(name, [{ key: 'pk', value: name }])).status).toBe(204);
    expect(await stored('mem', 'app1||pk')).toBe('"mem"');
    expect(await stored('plain', 'pk')).toBe('"plain"');
    expect(await stored('byname', 'byname||pk')).toBe('"byname"');
    expect(await stored('byns', 'default.app1||pk')).toBe('"byns"');
    expect(await stored('custom', 'shared||pk')).toBe('"custom"');
    expect(await stored('mem', 'pk')).toBeUndefined();
    expect(await (await fetch(url('custom/pk'))).text()).toBe('"custom"');
  });

  it('rejects keys containing || with 400', async () => {
    for (const r of [
      await post('mem', [{ key: 'a||b', value: 1 }]),
      await fetch(url('mem/a%7C%7Cb')),
      await fetch(url('mem/a%7C%7Cb'), { method: 'DELETE' }),
      await post('mem/bulk', { keys: ['ok', 'x||y'] }),
    ]) {
      expect(r.status).toBe(400);
      expect((await jsonOf(r)).errorCode).toBe('ERR_MALFORMED_REQUEST');
    }
  });
});

describe('state API: errors', () => {
  it('an unknown store is 400 ERR_STATE_STORE_NOT_FOUND listing the loaded stores', async () => {
    const r = await fetch(url('nope/k'));
    expect(r.status).toBe(400);
    const body = await jsonOf(r);
    expect(body.errorCode).toBe('ERR_STATE_STORE_NOT_FOUND');
    expect(body.message).toContain('mem');
    expect(body.message).toContain('lite');
  });

  it('malformed bodies are 400 ERR_MALFORMED_REQUEST', async () => {
    const bad = ['', 'not json', '{"key":"k"}', '[{"value":1}]', '[{"key":""}]', '[{"key":5}]', '[{"key":"k","etag":5}]',
      '[{"key":"k","metadata":{"a":1}}]', '[{"key":"k","options":{"concurrency":"sometimes"}}]', '[{"key":"k","metadata":{"ttlInSeconds":"x"}}]', '[1]'];
    for (const b of bad) {
      const r = await post('mem', b);
      expect(r.status, b).toBe(400);
      expect((await jsonOf(r)).errorCode, b).toBe('ERR_MALFORMED_REQUEST');
    }
  });

  it('etag mismatch is 409, an invalid etag 400, and neither changes the value', async () => {
    await post('lite', [{ key: 'e', value: 'v1' }]);
    const etag = (await fetch(url('lite/e'))).headers.get('etag')!;
    expect((await post('lite', [{ key: 'e', value: 'v2', etag }])).status).toBe(204);
    const stale = await post('lite', [{ key: 'e', value: 'v3', etag }]);
    expect(stale.status).toBe(409);
    expect((await jsonOf(stale)).errorCode).toBe('ERR_STATE_SAVE');
    const invalid = await post('lite', [{ key: 'e', value: 'v3', etag: 'xyz' }]);
    expect(invalid.status).toBe(400);
    expect((await jsonOf(invalid)).errorCode).toBe('ERR_STATE_SAVE');
    expect(await (await fetch(url('lite/e'))).text()).toBe('"v2"');
  });

  it('first-write without an etag does not overwrite', async () => {
    await post('mem', [{ key: 'fw', value: 1 }]);
    const r = await post('mem', [{ key: 'fw', value: 2, options: { concurrency: 'first-write', consistency: 'strong' } }]);
    expect(r.status).toBe(409);
    expect(await (await fetch(url('mem/fw'))).text()).toBe('1');
  });

  it('a multi-item save is all or nothing on the built-in stores', async () => {
    await post('mem', [{ key: 'm1', value: 'old' }]);
    const r = await post('mem', [{ key: 'm1', value: 'new' }, { key: 'm2', value: 'x', etag: '99999' }]);
    expect(r.status).toBe(409);
    expect(await (await fetch(url('mem/m1'))).text()).toBe('"old"');
    expect((await fetch(url('mem/m2'))).status).toBe(204);
  });
});

describe('state API: delete', () => {
  it('deletes, honours If-Match, and 204s a missing key', async () => {
    await post('mem', [{ key: 'd', value: 1 }]);
    const etag = (await fetch(url('mem/d'))).headers.get('etag')!;
    const wrong = await fetch(url('mem/d'), { method: 'DELETE', headers: { 'if-match': String(Number(etag) + 1000) } });
    expect(wrong.status).toBe(409);
    expect((await jsonOf(wrong)).errorCode).toBe('ERR_STATE_DELETE');
    const invalid = await fetch(url('mem/d'), { method: 'DELETE', headers: { 'if-match': 'W/"nope"' } });
    expect(invalid.status).toBe(400);
    expect((await fetch(url('mem/d'), { method: 'DELETE', headers: { 'if-match': etag } })).status).toBe(204);
    expect((await fetch(url('mem/d'))).status).toBe(204);
    expect((await fetch(url('mem/d'), { method: 'DELETE' })).status).toBe(204);
  });
});

describe('state API: bulk get', () => {
  it('returns {key, data, etag} in key order; missing keys have no data', async () => {
    await post('mem', [{ key: 'b1', value: { n: 1 } }, { key: 'b2', value: 'two' }]);
    await direct('mem').set({ key: 'app1||raw', value: Buffer.from([0xff, 0x00, 0x41]) });
    const r = await post('mem/bulk', { keys: ['b1', 'missing', 'b2', 'raw'], parallelism: 10 });
    expect(r.status).toBe(200);
    const body = (await jsonOf(r)) as { key: string; data?: unknown; etag?: string }[];
    expect(body.map((x) => x.key)).toEqual(['b1', 'missing', 'b2', 'raw']);
    expect(body[0].data).toEqual({ n: 1 });
    expect(body[0].etag).toMatch(/^\d+$/);
    expect(body[1]).toEqual({ key: 'missing' });
    expect(body[2].data).toBe('two');
    // bytes that are not JSON come back base64-encoded
    expect(Buffer.from(body[3].data as string, 'base64')).toEqual(Buffer.from([0xff, 0x00, 0x41]));
    expect(await (await post('mem/bulk', { keys: [] })).json()).toEqual([]);
    expect((await post('mem/bulk', { keys: 'b1' })).status).toBe(400);
  });
});

describe('state API: transactions', () => {
  it('applies upserts and deletes together', async () => {
    await post('lite', [{ key: 't-old', value: 1 }]);
    const r = await post('lite/transaction', {
      operations: [
        { operation: 'upsert', request: { key: 't-new', value: { ok: true } } },
        { operation: 'delete', request: { key: 't-old' } },
      ],
      metadata: { partitionKey: 'p' },
    });
    expect(r.status).toBe(204);
    expect(await (await fetch(url('lite/t-new'))).json()).toEqual({ ok: true });
    expect((await fetch(url('lite/t-old'))).status).toBe(204);
  });

  it('a mismatching etag fails the whole transaction with 409', async () => {
    await post('lite', [{ key: 't1', value: 'keep' }]);
    const r = await post('lite/transaction', {
      operations: [
        { operation: 'upsert', request: { key: 't2', value: 'never' } },
        { operation: 'delete', request: { key: 't1', etag: '424242' } },
      ],
    });
    expect(r.status).toBe(409);
    expect((await jsonOf(r)).errorCode).toBe('ERR_STATE_TRANSACTION');
    expect(await (await fetch(url('lite/t1'))).text()).toBe('"keep"');
    expect((await fetch(url('lite/t2'))).status).toBe(204);
  });

  it('rejects unknown operations and malformed bodies', async () => {
    const r = await post('lite/transaction', { operations: [{ operation: 'merge', request: { key: 'x' } }] });
    expect(r.status).toBe(400);
    expect((await jsonOf(r)).errorCode).toBe('ERR_NOT_SUPPORTED_STATE_OPERATION');
    for (const b of [{}, { operations: {} }, { operations: [{ operation: 'upsert' }] }, { operations: [{ operation: 'upsert', request: { key: 'a||b' } }] }]) {
      const x = await post('lite/transaction', b);
      expect(x.status).toBe(400);
      expect((await jsonOf(x)).errorCode).toBe('ERR_MALFORMED_REQUEST');
    }
  });
});

describe('state API: TTL', () => {
  it('an item saved with metadata.ttlInSeconds expires and shows its expiry time', async () => {
    expect((await post('mem', [{ key: 'ttl', value: 1, metadata: { ttlInSeconds: '1' } }])).status).toBe(204);
    const g = await fetch(url('mem/ttl'));
    expect(g.status).toBe(200);
    const expiry = Date.parse(g.headers.get('metadata.ttlexpiretime') ?? '');
    expect(expiry).toBeGreaterThan(Date.now());
    // the store's clock expires it: looked at until it is gone
    await vi.waitFor(async () => expect((await fetch(url('mem/ttl'))).status).toBe(204), { timeout: 10_000, interval: 50 });
  });
});

describe('state API: request metadata in the query string', () => {
  it('applies metadata.* query parameters of a save to every item', async () => {
    const r = await fetch(url('mem?metadata.ttlInSeconds=100'), { method: 'POST', body: JSON.stringify([{ key: 'qm', value: 1 }]) });
    expect(r.status).toBe(204);
    expect(Date.parse((await fetch(url('mem/qm'))).headers.get('metadata.ttlexpiretime') ?? '')).toBeGreaterThan(Date.now() + 90_000);
    expect((await fetch(url('mem?metadata.ttlInSeconds=soon'), { method: 'POST', body: '[{"key":"qm","value":2}]' })).status).toBe(400);
  });

  // the reference runtime copies each metadata.* query parameter over every item's metadata
  const expiresIn = async (key: string) => Date.parse((await fetch(url(`mem/${key}`))).headers.get('metadata.ttlexpiretime') ?? '') - Date.now();

  it('a query parameter wins over the same name in an item of a save', async () => {
    const r = await fetch(url('mem?metadata.ttlInSeconds=300'), { method: 'POST', body: JSON.stringify([{ key: 'qw1', value: 1, metadata: { ttlInSeconds: '1' } }, { key: 'qw2', value: 2 }]) });
    expect(r.status).toBe(204);
    expect(await expiresIn('qw1')).toBeGreaterThan(290_000);
    expect(await expiresIn('qw2')).toBeGreaterThan(290_000);
  });

  it('a query parameter wins over the body and every operation of a transaction', async () => {
    const ops = [{ operation: 'upsert', request: { key: 'qt1', value: 1, metadata: { ttlInSeconds: '1' } } }];
    const r = await fetch(url('mem/transaction?metadata.ttlInSeconds=300'), { method: 'POST', body: JSON.stringify({ operations: ops, metadata: { ttlInSeconds: '2' } }) });
    expect(r.status).toBe(204);
    expect(await expiresIn('qt1')).toBeGreaterThan(290_000);
    expect((await fetch(url('mem/transaction?metadata.ttlInSeconds=x'), { method: 'POST', body: JSON.stringify({ operations: ops }) })).status).toBe(400);
  });
});

describe('state API: metadata', () => {
  it('lists the stores with truthful capabilities', async () => {
    const md = (await (await fetch(`${s.base}/v1.0/metadata`)).json()) as { components: { name: string; type: string; capabilities: string[] }[] };
    const mem = md.components.find((c) => c.name === 'mem');
    expect(mem?.type).toBe('state.in-memory');
    expect(mem?.capabilities.sort()).toEqual(['ACTOR', 'ETAG', 'QUERY_API', 'TRANSACTIONAL']);
    expect(md.components.find((c) => c.name === 'lite')?.capabilities.sort()).toEqual(['ACTOR', 'ETAG', 'QUERY_API', 'TRANSACTIONAL']);
  });
});

describe('state API: failing and limited stores', () => {
  let t: StateSidecar;
  beforeAll(async () => {
    const catalog = builtinCatalog();
    const broken = (): StateStore => ({
      init: async () => {},
      close: async () => {},
      capabilities: () => [],
      features: () => [],
      get: async () => {
        throw new Error('disk on fire');
      },
      bulkGet: async () => {
        throw new Error('disk on fire');
      },
      set: async () => {
        throw new Error('disk on fire');
      },
      delete: async () => {},
      bulkSet: async () => {},
      bulkDelete: async () => {},
    });
    catalog.add('state.broken', { category: 'state', load: async () => broken });
    t = await startStateSidecar('app2', [{ name: 'broken', type: 'state.broken' }], catalog);
  });
  afterAll(async () => t?.stop());

  it('a store failure is a 500 with the operation code; a transaction on a non-transactional store 400', async () => {
    const g = await fetch(`${t.base}/v1.0/state/broken/k`);
    expect(g.status).toBe(500);
    expect(await jsonOf(g)).toMatchObject({ errorCode: 'ERR_STATE_GET', message: expect.stringContaining('disk on fire') });
    const p = await fetch(`${t.base}/v1.0/state/broken`, { method: 'POST', body: '[{"key":"k","value":1}]' });
    expect(p.status).toBe(500);
    expect((await jsonOf(p)).errorCode).toBe('ERR_STATE_SAVE');
    const b = await fetch(`${t.base}/v1.0/state/broken/bulk`, { method: 'POST', body: '{"keys":["k"]}' });
    expect(b.status).toBe(500);
    expect((await jsonOf(b)).errorCode).toBe('ERR_STATE_BULK_GET');
    const tx = await fetch(`${t.base}/v1.0/state/broken/transaction`, { method: 'POST', body: '{"operations":[]}' });
    expect(tx.status).toBe(400);
    expect((await jsonOf(tx)).errorCode).toBe('ERR_STATE_STORE_NOT_SUPPORTED');
    const q = await fetch(`${t.base}/v1.0-alpha1/state/broken/query`, { method: 'POST', body: '{}' });
    expect(q.status).toBe(400);
    expect((await jsonOf(q)).errorCode).toBe('ERR_STATE_STORE_NOT_SUPPORTED');
  });
});

describe('state API: store configuration', () => {
  it('a keyPrefix containing || stops the sidecar with a message naming the component', async () => {
    await expect(startStateSidecar('app3', [{ name: 'badprefix', type: 'state.in-memory', metadata: { keyPrefix: 'a||b' } }])).rejects.toThrow(/component "badprefix".*keyPrefix "a\|\|b" must not contain/);
  });
});
