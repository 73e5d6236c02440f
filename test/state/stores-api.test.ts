/**
 * The same state API calls through a real sidecar on each of the four built-in stores
 * (Redis and PostgreSQL real), and the real @dapr/dapr SDK client as a user's app would call it.
 */
import { randomBytes } from 'node:crypto';
import { CommunicationProtocolEnum, DaprClient, LogLevel, StateConcurrencyEnum, StateConsistencyEnum } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { dropStateTables, postgresTarget } from '../services/postgres.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';
import { startStateSidecar, type StateSidecar, type StoreDef } from './sidecar.ts';

const redis = await redisTarget();
const postgres = await postgresTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const havePostgres = requireService('PostgreSQL', postgres.available, `nothing answers at ${postgres.host}:${postgres.port}`);
const run = randomBytes(4).toString('hex');
const table = `rt_state_api_${run}`;
// a fresh key prefix per run keeps this suite apart from anything else in the shared Redis
const appId = `api-${run}`;

const stores: StoreDef[] = [
  { name: 'mem', type: 'state.in-memory' },
  { name: 'lite', type: 'state.sqlite', metadata: { connectionString: ':memory:' } },
];
if (haveRedis) stores.push({ name: 'redis', type: 'state.redis', metadata: redisMetadata(redis) });
if (havePostgres) stores.push({ name: 'pg', type: 'state.postgresql', metadata: { connectionString: postgres.url, tableName: table } });

let s: StateSidecar;
beforeAll(async () => {
  s = await startStateSidecar(appId, stores);
});
afterAll(async () => {
  if (!s) return;
  // remove what this suite wrote
  for (const st of stores) {
    const store = s.sidecar.ctx.components.stateStore(st.name);
    await store?.bulkDelete(['k1', 'k2', 'gone', 'sdk-a', 'sdk-b', 'sdk-c', 'tx'].map((k) => ({ key: `${appId}||${k}` }))).catch(() => undefined);
  }
  await s.stop();
  if (havePostgres) await dropStateTables(postgres.url, [table]);
});

const names = stores.map((st) => st.name);
const noop = () => undefined;
const quiet = { error: noop, warn: noop, info: noop, verbose: noop, debug: noop };

describe.each(names)('state API on store %s', (name) => {
  const url = (p = '') => `${s.base}/v1.0/state/${name}${p}`;
  const post = (p: string, body: unknown) => fetch(url(p), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('saves, gets with an etag, bulk-gets, transacts and deletes', async () => {
    expect((await post('', [{ key: 'k1', value: { a: 'ü' } }, { key: 'k2', value: 'two' }])).status).toBe(204);
    const g = await fetch(url('/k1'));
    expect(g.status).toBe(200);
    expect(await g.json()).toEqual({ a: 'ü' });
    const etag = g.headers.get('etag')!;
    expect(etag).toMatch(/^\d+$/);

    const stale = await post('', [{ key: 'k1', value: 1, etag: String(Number(etag) + 100000) }]);
    expect(stale.status).toBe(409);
    expect((await post('', [{ key: 'k1', value: 1, etag: 'abc' }])).status).toBe(400);
    expect((await post('', [{ key: 'k1', value: { a: 'v2' }, etag }])).status).toBe(204);

    const bulk = (await (await post('/bulk', { keys: ['k1', 'nope', 'k2'] })).json()) as { key: string; data?: unknown }[];
    expect(bulk.map((b) => [b.key, b.data])).toEqual([['k1', { a: 'v2' }], ['nope', undefined], ['k2', 'two']]);

    const tx = await post('/transaction', { operations: [{ operation: 'upsert', request: { key: 'tx', value: [1, 2] } }, { operation: 'delete', request: { key: 'k2' } }] });
    expect(tx.status).toBe(204);
    expect(await (await fetch(url('/tx'))).json()).toEqual([1, 2]);
    expect((await fetch(url('/k2'))).status).toBe(204);

    const etag2 = (await fetch(url('/k1'))).headers.get('etag')!;
    expect((await fetch(url('/k1'), { method: 'DELETE', headers: { 'if-match': etag } })).status).toBe(409);
    expect((await fetch(url('/k1'), { method: 'DELETE', headers: { 'if-match': etag2 } })).status).toBe(204);
    expect((await fetch(url('/k1'))).status).toBe(204);
  });

  it('reports the query API exactly where it answers', async () => {
    const caps = ((await (await fetch(`${s.base}/v1.0/metadata`)).json()) as { components: { name: string; capabilities: string[] }[] }).components.find((c) => c.name === name)!.capabilities;
    const q = await fetch(`${s.base}/v1.0-alpha1/state/${name}/query`, { method: 'POST', body: '{"filter":{"EQ":{"a":"x"}}}' });
    expect(q.status).toBe(caps.includes('QUERY_API') ? 200 : 400);
    expect(caps).toEqual(expect.arrayContaining(['ETAG', 'TRANSACTIONAL', 'ACTOR']));
  });

  it('works for the @dapr/dapr SDK client', async () => {
    const client = new DaprClient({
      daprHost: '127.0.0.1',
      daprPort: String(s.sidecar.httpPort),
      communicationProtocol: CommunicationProtocolEnum.HTTP,
      // the SDK logs the expected first-write conflict below; keep the test output clean
      logger: { level: LogLevel.Error, service: quiet },
    });
    const saved = await client.state.save(name, [
      { key: 'sdk-a', value: { n: 1 } },
      { key: 'sdk-b', value: 'text' },
    ]);
    expect(saved.error).toBeUndefined();
    expect(await client.state.get(name, 'sdk-a')).toEqual({ n: 1 });
    expect(await client.state.get(name, 'sdk-b')).toBe('text');
    const bulk = (await client.state.getBulk(name, ['sdk-a', 'sdk-b'])) as { key: string; data: unknown }[];
    expect(bulk.map((b) => b.data)).toEqual([{ n: 1 }, 'text']);
    await client.state.transaction(name, [
      { operation: 'upsert', request: { key: 'sdk-c', value: 3 } },
      { operation: 'delete', request: { key: 'sdk-b' } },
    ]);
    expect(await client.state.get(name, 'sdk-c')).toBe(3);
    expect(await client.state.get(name, 'sdk-b')).toBe('');
    const fw = await client.state.save(name, [{ key: 'sdk-a', value: 2, options: { concurrency: StateConcurrencyEnum.CONCURRENCY_FIRST_WRITE, consistency: StateConsistencyEnum.CONSISTENCY_STRONG } }]);
    expect(fw.error).toBeDefined();
    expect((await client.state.delete(name, 'sdk-a')).error).toBeUndefined();
    expect(await client.state.get(name, 'sdk-a')).toBe('');
  });
});

describe('state API TTL on every store', () => {
  it('expires items saved with ttlInSeconds', async () => {
    const save = (name: string) =>
      fetch(`${s.base}/v1.0/state/${name}`, { method: 'POST', body: JSON.stringify([{ key: 'gone', value: 1, metadata: { ttlInSeconds: '1' } }]) });
    for (const name of names) expect((await save(name)).status, name).toBe(204);
    for (const name of names) expect((await fetch(`${s.base}/v1.0/state/${name}/gone`)).status, name).toBe(200);
    // each store's clock expires them: looked at until they are gone
    await vi.waitFor(async () => {
      for (const name of names) expect((await fetch(`${s.base}/v1.0/state/${name}/gone`)).status, name).toBe(204);
    }, { timeout: 10_000, interval: 50 });
  });
});
