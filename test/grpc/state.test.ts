/**
 * State over the gRPC runtime API: the real @dapr/dapr SDK client (gRPC protocol) and raw
 * grpc-js calls for the error codes, on the in-memory, SQLite and (real) Redis stores of a
 * real sidecar. Without Redis (laptop) the Redis rows are left out; CI fails instead.
 */
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { StateConcurrencyEnum, StateConsistencyEnum } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

const redis = await redisTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
// a fresh key prefix per run keeps this suite apart from anything else in the shared Redis
const redisPrefix = `rt-grpc-${randomBytes(4).toString('hex')}`;
const stores = haveRedis ? ['mem', 'lite', 'redis'] : ['mem', 'lite'];

let s: RuntimeSidecar;
beforeAll(async () => {
  const extra = haveRedis ? [componentYaml('redis', 'state.redis', { ...redisMetadata(redis), keyPrefix: redisPrefix })] : [];
  s = await startRuntimeSidecar({ extraComponents: extra });
});
afterAll(async () => {
  if (s && haveRedis) {
    const store = s.sidecar.ctx.components.stateStore('redis');
    const keys = ['sdk-a', 'sdk-b', 'sdk-c', 'sdk-missing', 'e1', 'fw', 'sdk-fw', 'b1', 'b2', 'b3', 't1', 't2'];
    await store?.bulkDelete(keys.map((k) => ({ key: `${redisPrefix}||${k}` }))).catch(() => undefined);
  }
  await s?.stop();
});

interface GetRes {
  data: Buffer;
  etag: string;
  metadata: Record<string, string>;
}

describe.each(stores)('state through the gRPC API on store %s', (store) => {
  it('saves, gets, bulk-gets, transacts and deletes with the @dapr/dapr SDK over gRPC', async () => {
    const c = s.sdk();
    await c.state.save(store, [
      { key: 'sdk-a', value: { n: 1, s: 'ü' } },
      { key: 'sdk-b', value: 'text' },
    ]);
    expect(await c.state.get(store, 'sdk-a')).toEqual({ n: 1, s: 'ü' });
    expect(await c.state.get(store, 'sdk-b')).toBe('text');
    // an absent key answers empty data, which the SDK reads as ''
    expect(await c.state.get(store, 'sdk-missing')).toBe('');

    const bulk = await c.state.getBulk(store, ['sdk-a', 'sdk-b', 'sdk-missing']);
    expect(bulk.map((b) => [b.key, b.data])).toEqual([
      ['sdk-a', { n: 1, s: 'ü' }],
      ['sdk-b', 'text'],
      ['sdk-missing', ''],
    ]);
    expect(bulk[0].etag).not.toBe('');

    await c.state.transaction(store, [
      { operation: 'upsert', request: { key: 'sdk-c', value: JSON.stringify({ tx: true }) } },
      { operation: 'delete', request: { key: 'sdk-b' } },
    ]);
    expect(await c.state.get(store, 'sdk-c')).toEqual({ tx: true });
    expect(await c.state.get(store, 'sdk-b')).toBe('');

    await c.state.delete(store, 'sdk-a');
    expect(await c.state.get(store, 'sdk-a')).toBe('');
  });

  it('keeps etags: a stale etag is ABORTED, a current one wins; first-write needs one', async () => {
    await s.call('SaveState', { store_name: store, states: [{ key: 'e1', value: Buffer.from('"v1"') }] });
    const first = await s.call<GetRes>('GetState', { store_name: store, key: 'e1' });
    expect(first.data.toString()).toBe('"v1"');
    expect(first.etag).not.toBe('');

    await s.call('SaveState', { store_name: store, states: [{ key: 'e1', value: Buffer.from('"v2"'), etag: { value: first.etag } }] });
    const second = await s.call<GetRes>('GetState', { store_name: store, key: 'e1' });
    expect(second.etag).not.toBe(first.etag);

    const stale = await s.fail('SaveState', { store_name: store, states: [{ key: 'e1', value: Buffer.from('"v3"'), etag: { value: first.etag } }] });
    expect(stale.code).toBe(grpc.status.ABORTED);
    expect(stale.metadata.get('rt-error-code')).toEqual(['ERR_STATE_SAVE']);
    const staleDelete = await s.fail('DeleteState', { store_name: store, key: 'e1', etag: { value: first.etag } });
    expect(staleDelete.code).toBe(grpc.status.ABORTED);
    const staleTx = await s.fail('ExecuteStateTransaction', {
      storeName: store,
      operations: [{ operationType: 'upsert', request: { key: 'e1', value: Buffer.from('1'), etag: { value: first.etag } } }],
    });
    expect(staleTx.code).toBe(grpc.status.ABORTED);
    expect((await s.call<GetRes>('GetState', { store_name: store, key: 'e1' })).data.toString()).toBe('"v2"');

    // first-write on an existing key without an etag fails; on a new key it succeeds once
    const fw = { concurrency: 1, consistency: 2 };
    await s.call('SaveState', { store_name: store, states: [{ key: 'fw', value: Buffer.from('1'), options: fw }] });
    const again = await s.fail('SaveState', { store_name: store, states: [{ key: 'fw', value: Buffer.from('2'), options: fw }] });
    expect(again.code).toBe(grpc.status.ABORTED);

    await s.call('DeleteState', { store_name: store, key: 'e1', etag: { value: second.etag } });
    expect((await s.call<GetRes>('GetState', { store_name: store, key: 'e1' })).data.length).toBe(0);
  });

  it('the SDK sees the etag conflict as an error', async () => {
    const c = s.sdk();
    await c.state.save(store, [{ key: 'sdk-fw', value: 1 }]);
    await expect(c.state.save(store, [{ key: 'sdk-fw', value: 2, etag: '999999', options: { concurrency: StateConcurrencyEnum.CONCURRENCY_FIRST_WRITE, consistency: StateConsistencyEnum.CONSISTENCY_STRONG } }])).rejects.toThrow();
    expect(await c.state.get(store, 'sdk-fw')).toBe(1);
  });

  it('deletes in bulk', async () => {
    await s.call('SaveState', { store_name: store, states: ['b1', 'b2', 'b3'].map((k) => ({ key: k, value: Buffer.from(`"${k}"`) })) });
    await s.call('DeleteBulkState', { store_name: store, states: [{ key: 'b1' }, { key: 'b2' }] });
    const res = await s.call<{ items: { key: string; data: Buffer }[] }>('GetBulkState', { store_name: store, keys: ['b1', 'b2', 'b3'] });
    expect(res.items.map((i) => [i.key, i.data.toString()])).toEqual([
      ['b1', ''],
      ['b2', ''],
      ['b3', '"b3"'],
    ]);
  });

  it('transactions are all or nothing', async () => {
    // t2 exists, so its etag is checked on every store (Redis accepts any etag for a missing key)
    await s.call('SaveState', { store_name: store, states: [{ key: 't1', value: Buffer.from('"old"') }, { key: 't2', value: Buffer.from('"t2"') }] });
    const bad = await s.fail('ExecuteStateTransaction', {
      storeName: store,
      operations: [
        { operationType: 'upsert', request: { key: 't1', value: Buffer.from('"new"') } },
        { operationType: 'upsert', request: { key: 't2', value: Buffer.from('"x"'), etag: { value: '424242' } } },
      ],
    });
    expect([grpc.status.ABORTED, grpc.status.INVALID_ARGUMENT]).toContain(bad.code);
    expect((await s.call<GetRes>('GetState', { store_name: store, key: 't1' })).data.toString()).toBe('"old"');
  });
});

describe('state query (alpha) over the gRPC API', () => {
  it('the @dapr/dapr SDK queries with filter, sort and pages; bad queries are INVALID_ARGUMENT', async () => {
    const c = s.sdk();
    await c.state.save(
      'lite',
      [1, 2, 3, 4].map((n) => ({ key: `person-${n}`, value: { person: { org: n % 2 ? 'Dev Ops' : 'Finance', id: n } } })),
    );
    const query = { filter: { EQ: { 'person.org': 'Dev Ops' } }, sort: [{ key: 'person.id', order: 'DESC' as const }], page: { limit: 1 } };
    const first = await c.state.query('lite', query);
    const parse = (r: { key: string; data: unknown }) => [r.key, JSON.parse(Buffer.from(r.data as Uint8Array).toString())];
    expect(first.results.map(parse)).toEqual([['person-3', { person: { org: 'Dev Ops', id: 3 } }]]);
    expect(first.token).not.toBe('');
    const next = await c.state.query('lite', { ...query, page: { limit: 1, token: first.token } });
    expect(next.results.map((r) => r.key)).toEqual(['person-1']);

    for (const q of ['not json', '{"filter": {"LIKE": {"a": 1}}}', '{"page": {"limit": -1}}']) {
      const e = await s.fail('QueryStateAlpha1', { store_name: 'lite', query: q });
      expect({ q, code: e.code }).toEqual({ q, code: grpc.status.INVALID_ARGUMENT });
    }
  });
});

describe('state API parity and errors', () => {
  it('gRPC and HTTP share keys (same app-id prefix) and values', async () => {
    await s.call('SaveState', { store_name: 'lite', states: [{ key: 'shared', value: Buffer.from('{"from":"grpc"}'), metadata: { ttlInSeconds: '600' } }] });
    const res = await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/lite/shared`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ from: 'grpc' });
    const stored = await s.sidecar.ctx.components.stateStore('lite')?.get('grpc-api||shared');
    expect(Buffer.from(stored?.value ?? []).toString()).toBe('{"from":"grpc"}');
  });

  it('bad input answers INVALID_ARGUMENT with the state block message', async () => {
    const cases: [string, unknown, string][] = [
      ['GetState', { store_name: 'nope', key: 'a' }, 'ERR_STATE_STORE_NOT_FOUND'],
      ['GetState', { store_name: 'mem', key: '' }, 'ERR_MALFORMED_REQUEST'],
      ['GetState', { store_name: 'mem', key: 'a||b' }, 'ERR_MALFORMED_REQUEST'],
      ['GetState', { store_name: 'mem', key: 'a', consistency: 7 }, 'ERR_MALFORMED_REQUEST'],
      ['SaveState', { store_name: 'mem', states: [{ key: '' }] }, 'ERR_MALFORMED_REQUEST'],
      ['SaveState', { store_name: 'mem', states: [{ key: 'x', metadata: { ttlInSeconds: 'soon' } }] }, 'ERR_MALFORMED_REQUEST'],
      ['SaveState', { store_name: 'mem', states: [{ key: 'x', options: { concurrency: 9 } }] }, 'ERR_MALFORMED_REQUEST'],
      ['GetBulkState', { store_name: 'mem', keys: ['ok', ''] }, 'ERR_MALFORMED_REQUEST'],
      ['GetBulkState', { store_name: 'mem', keys: Array.from({ length: 10_001 }, (_, i) => `k${i}`) }, 'ERR_MALFORMED_REQUEST'],
      ['DeleteBulkState', { store_name: 'mem', states: Array.from({ length: 10_001 }, (_, i) => ({ key: `k${i}` })) }, 'ERR_MALFORMED_REQUEST'],
      ['DeleteState', { store_name: 'mem', key: 'x\u0000y' }, 'ERR_MALFORMED_REQUEST'],
      ['ExecuteStateTransaction', { storeName: 'mem', operations: [{ operationType: 'merge', request: { key: 'a' } }] }, 'ERR_NOT_SUPPORTED_STATE_OPERATION'],
      ['ExecuteStateTransaction', { storeName: 'mem', operations: [{ operationType: 'upsert' }] }, 'ERR_MALFORMED_REQUEST'],
      ['ExecuteStateTransaction', { storeName: 'vault', operations: [] }, 'ERR_STATE_STORE_NOT_FOUND'],
    ];
    for (const [method, req, code] of cases) {
      const e = await s.fail(method, req);
      expect({ method, req, code: e.code, errorCode: e.metadata.get('rt-error-code')[0] }).toEqual({ method, req, code: grpc.status.INVALID_ARGUMENT, errorCode: code });
      expect(e.details.length).toBeGreaterThan(10);
    }
    const e = await s.fail('GetState', { store_name: 'nope', key: 'a' });
    expect(e.details).toContain(haveRedis ? 'loaded state stores: lite, mem, redis' : 'loaded state stores: lite, mem');
  });
});
