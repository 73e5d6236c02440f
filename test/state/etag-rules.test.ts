/**
 * Each built-in store's etag rules, as its reference counterpart has them (docs/state.md), as a
 * table: every row runs over HTTP and over gRPC on a real sidecar, with real Redis and
 * PostgreSQL. The answers an application sees must be the reference runtime's.
 */
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentYaml, startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';
import { requireService } from '../services/ci.ts';
import { dropStateTables, postgresTarget } from '../services/postgres.ts';
import { redisMetadata, redisTarget } from '../services/redis.ts';

const redis = await redisTarget();
const postgres = await postgresTarget();
const haveRedis = requireService('Redis', redis.available, `nothing answers at ${redis.url}`);
const havePostgres = requireService('PostgreSQL', postgres.available, `nothing answers at ${postgres.host}:${postgres.port}`);
const run = randomBytes(4).toString('hex');
const table = `rt_etag_rules_${run}`;
// a fresh key prefix per run keeps this suite apart from anything else in the shared Redis
const prefix = `etag-${run}`;

type Outcome = 'ok' | 'conflict';
/** The answer per store: in-memory, sqlite, redis, postgresql. */
type PerStore = Record<'mem' | 'lite' | 'redis' | 'pg', Outcome>;
const all = (o: Outcome): PerStore => ({ mem: o, lite: o, redis: o, pg: o });

interface Api {
  /** Puts a key with a value; returns its etag. */
  seed(store: string, key: string, value: string): Promise<string>;
  save(store: string, items: { key: string; value: string; etag?: string; firstWrite?: boolean }[]): Promise<Outcome>;
  del(store: string, key: string, etag?: string, firstWrite?: boolean): Promise<Outcome>;
  transact(store: string, ops: { op: 'upsert' | 'delete'; key: string; value?: string; etag?: string }[]): Promise<Outcome>;
  value(store: string, key: string): Promise<string | undefined>;
}

let s: RuntimeSidecar;

const http: Api = {
  async seed(store, key, value) {
    await http.save(store, [{ key, value }]);
    return (await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/${store}/${key}`)).headers.get('etag')!;
  },
  async save(store, items) {
    const body = items.map((i) => ({ key: i.key, value: i.value, etag: i.etag, options: i.firstWrite ? { concurrency: 'first-write' } : undefined }));
    return outcome(await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/${store}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }));
  },
  async del(store, key, etag, firstWrite) {
    const q = firstWrite ? '?concurrency=first-write' : '';
    return outcome(await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/${store}/${key}${q}`, { method: 'DELETE', headers: etag ? { 'if-match': etag } : {} }));
  },
  async transact(store, ops) {
    const operations = ops.map((o) => ({ operation: o.op, request: { key: o.key, value: o.value, etag: o.etag } }));
    return outcome(await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/${store}/transaction`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operations }) }));
  },
  async value(store, key) {
    const r = await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/state/${store}/${key}`);
    return r.status === 200 ? JSON.parse(await r.text()) : undefined;
  },
};

async function outcome(r: Response): Promise<Outcome> {
  if (r.status === 204) return 'ok';
  const body = (await r.json()) as { errorCode: string };
  // the reference answers an etag conflict with 409 and the operation's own code
  if (r.status === 409 && ['ERR_STATE_SAVE', 'ERR_STATE_DELETE', 'ERR_STATE_TRANSACTION'].includes(body.errorCode)) return 'conflict';
  throw new Error(`unexpected HTTP answer ${r.status} ${JSON.stringify(body)}`);
}

const FIRST_WRITE = { concurrency: 1, consistency: 2 };
const grpcOutcome = async (p: Promise<unknown>): Promise<Outcome> => {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if ((e as grpc.ServiceError).code === grpc.status.ABORTED) return 'conflict';
    throw e;
  }
};
const etagOf = (etag?: string) => (etag === undefined ? undefined : { value: etag });

const rpc: Api = {
  async seed(store, key, value) {
    await rpc.save(store, [{ key, value }]);
    return (await s.call<{ etag: string }>('GetState', { store_name: store, key })).etag;
  },
  save: (store, items) =>
    grpcOutcome(s.call('SaveState', { store_name: store, states: items.map((i) => ({ key: i.key, value: Buffer.from(JSON.stringify(i.value)), etag: etagOf(i.etag), options: i.firstWrite ? FIRST_WRITE : undefined })) })),
  del: (store, key, etag, firstWrite) => grpcOutcome(s.call('DeleteState', { store_name: store, key, etag: etagOf(etag), options: firstWrite ? FIRST_WRITE : undefined })),
  transact: (store, ops) =>
    grpcOutcome(
      s.call('ExecuteStateTransaction', {
        storeName: store,
        operations: ops.map((o) => ({ operationType: o.op, request: { key: o.key, value: o.value === undefined ? undefined : Buffer.from(JSON.stringify(o.value)), etag: etagOf(o.etag) } })),
      }),
    ),
  async value(store, key) {
    const r = await s.call<{ data: Buffer }>('GetState', { store_name: store, key });
    return r.data.length ? JSON.parse(r.data.toString()) : undefined;
  },
};

/** A key with a made-up but well-formed etag that was never its etag. */
const NEVER = '987654321';

interface Row {
  name: string;
  want: PerStore;
  /** Runs the case on fresh keys k(…); returns the outcome of the call under test. */
  run(api: Api, store: string, k: (n: string) => string): Promise<{ got: Outcome; after: unknown }>;
  /** What the keys hold afterwards, per outcome. */
  afterOk?: unknown;
  afterConflict?: unknown;
}

const rows: Row[] = [
  {
    name: 'first write of a missing key with an etag',
    want: { mem: 'conflict', lite: 'conflict', redis: 'ok', pg: 'conflict' },
    run: async (api, st, k) => ({ got: await api.save(st, [{ key: k('a'), value: 'new', etag: NEVER }]), after: await api.value(st, k('a')) }),
    afterOk: 'new',
    afterConflict: undefined,
  },
  {
    name: 'delete of a missing key with an etag',
    want: { mem: 'conflict', lite: 'conflict', redis: 'ok', pg: 'conflict' },
    run: async (api, st, k) => ({ got: await api.del(st, k('a'), NEVER), after: await api.value(st, k('a')) }),
    afterOk: undefined,
    afterConflict: undefined,
  },
  {
    name: 'update with a stale etag',
    want: all('conflict'),
    run: async (api, st, k) => {
      const old = await api.seed(st, k('a'), 'v1');
      await api.save(st, [{ key: k('a'), value: 'v2' }]);
      return { got: await api.save(st, [{ key: k('a'), value: 'v3', etag: old }]), after: await api.value(st, k('a')) };
    },
    afterConflict: 'v2',
  },
  {
    name: 'update with the current etag',
    want: all('ok'),
    run: async (api, st, k) => {
      const etag = await api.seed(st, k('a'), 'v1');
      return { got: await api.save(st, [{ key: k('a'), value: 'v2', etag }]), after: await api.value(st, k('a')) };
    },
    afterOk: 'v2',
  },
  {
    name: 'delete with a stale etag',
    want: all('conflict'),
    run: async (api, st, k) => {
      const old = await api.seed(st, k('a'), 'v1');
      await api.save(st, [{ key: k('a'), value: 'v2' }]);
      return { got: await api.del(st, k('a'), old), after: await api.value(st, k('a')) };
    },
    afterConflict: 'v2',
  },
  {
    name: 'first-write save without an etag on an existing key',
    want: all('conflict'),
    run: async (api, st, k) => {
      await api.seed(st, k('a'), 'v1');
      return { got: await api.save(st, [{ key: k('a'), value: 'v2', firstWrite: true }]), after: await api.value(st, k('a')) };
    },
    afterConflict: 'v1',
  },
  {
    name: 'first-write delete without an etag of an existing key',
    want: { mem: 'conflict', lite: 'ok', redis: 'ok', pg: 'ok' },
    run: async (api, st, k) => {
      await api.seed(st, k('a'), 'v1');
      return { got: await api.del(st, k('a'), undefined, true), after: await api.value(st, k('a')) };
    },
    afterOk: undefined,
    afterConflict: 'v1',
  },
  {
    name: 'bulk save where one item carries an etag for a missing key',
    want: { mem: 'conflict', lite: 'conflict', redis: 'ok', pg: 'conflict' },
    run: async (api, st, k) => {
      const got = await api.save(st, [
        { key: k('a'), value: 'x' },
        { key: k('b'), value: 'y', etag: NEVER },
      ]);
      return { got, after: [await api.value(st, k('a')), await api.value(st, k('b'))] };
    },
    afterOk: ['x', 'y'],
    afterConflict: [undefined, undefined],
  },
  {
    name: 'transaction with an upsert and a delete carrying etags for missing keys',
    want: { mem: 'conflict', lite: 'conflict', redis: 'ok', pg: 'conflict' },
    run: async (api, st, k) => {
      await api.seed(st, k('keep'), 'kept');
      const got = await api.transact(st, [
        { op: 'delete', key: k('keep') },
        { op: 'upsert', key: k('a'), value: 'x', etag: NEVER },
        { op: 'delete', key: k('b'), etag: NEVER },
      ]);
      return { got, after: [await api.value(st, k('keep')), await api.value(st, k('a'))] };
    },
    afterOk: [undefined, 'x'],
    afterConflict: ['kept', undefined],
  },
];

const stores = (['mem', 'lite', 'redis', 'pg'] as const).filter((st) => (st === 'redis' ? haveRedis : st === 'pg' ? havePostgres : true));

beforeAll(async () => {
  const extra: string[] = [];
  if (haveRedis) extra.push(componentYaml('redis', 'state.redis', { ...redisMetadata(redis), keyPrefix: prefix }));
  if (havePostgres) extra.push(componentYaml('pg', 'state.postgresql', { connectionString: postgres.url, tableName: table }));
  s = await startRuntimeSidecar({ extraComponents: extra });
});

const written: string[] = [];
afterAll(async () => {
  if (s && haveRedis) await s.sidecar.ctx.components.stateStore('redis')?.bulkDelete(written.map((key) => ({ key: `${prefix}||${key}` }))).catch(() => undefined);
  await s?.stop();
  if (havePostgres) await dropStateTables(postgres.url, [table]);
});

describe.each(stores)('etag rules of store %s', (store) => {
  for (const [apiName, api] of [
    ['HTTP', http],
    ['gRPC', rpc],
  ] as const) {
    it.each(rows.map((r, i) => [r.name, i] as const))(`${apiName}: %s`, async (_name, i) => {
      const row = rows[i];
      const tag = randomBytes(3).toString('hex');
      const k = (n: string) => {
        const key = `${apiName}-${i}-${n}-${tag}`;
        if (!written.includes(key)) written.push(key);
        return key;
      };
      const { got, after } = await row.run(api, store, k);
      expect(got).toBe(row.want[store]);
      const field = got === 'ok' ? 'afterOk' : 'afterConflict';
      if (field in row) expect(after).toEqual(row[field]);
    });
  }
});
