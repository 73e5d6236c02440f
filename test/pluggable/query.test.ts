/**
 * The state query API (HTTP and gRPC QueryStateAlpha1) forwarded to pluggable state stores
 * (dapr.proto.components.v1.QueriableStateStore): the example component as its own process for
 * filters, sort and pages; components on sockets in this process to check the exact request a
 * component receives (the ecosystem's encoding), stores that cannot query, and errors.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeClient } from '../../sidecar/src/grpc/runtime/proto.ts';
import { goJson } from '../../sidecar/src/pluggable/query.ts';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { json, ok, sidecarFor, startTestServer, tempDirs, useExampleSidecar, writeComponents, type TempDirs } from './helpers.ts';

interface QueryBody {
  results: { key: string; data: unknown; etag?: string; error?: string }[];
  token?: string;
  metadata?: Record<string, string>;
}
interface GrpcQueryResponse {
  results: { key: string; data: Buffer; etag: string; error: string }[];
  token: string;
  metadata: Record<string, string>;
}

/** A raw client of dapr.proto.runtime.v1.Dapr on the sidecar's gRPC port. */
function grpcQuery(sidecar: Sidecar) {
  const Client = runtimeClient();
  const client = new Client(`127.0.0.1:${sidecar.grpcPort}`, grpc.credentials.createInsecure());
  const query = (storeName: string, q: unknown, metadata: Record<string, string> = {}) =>
    new Promise<GrpcQueryResponse>((resolve, reject) => {
      const fn = (client as unknown as Record<string, (r: unknown, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: GrpcQueryResponse) => void) => void>).QueryStateAlpha1;
      fn.call(client, { store_name: storeName, query: typeof q === 'string' ? q : JSON.stringify(q), metadata }, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r)));
    });
  const fail = (storeName: string, q: unknown, metadata: Record<string, string> = {}) =>
    query(storeName, q, metadata).then(
      () => {
        throw new Error('QueryStateAlpha1 succeeded; a failure was expected');
      },
      (e: grpc.ServiceError) => e,
    );
  return { query, fail, close: () => client.close() };
}

const errorCodeOf = (e: grpc.ServiceError) => String(e.metadata.get('rt-error-code')[0]);

const PEOPLE = [
  { key: 'p1', value: { person: { org: 'Dev Ops', id: 1 }, state: 'CA' } },
  { key: 'p2', value: { person: { org: 'Finance', id: 2 }, state: 'WA' } },
  { key: 'p3', value: { person: { org: 'Dev Ops', id: 3 }, state: 'WA' } },
  { key: 'p4', value: { person: { org: 'Hardware', id: 4 }, state: 'TX' } },
  { key: 'p5', value: { person: { org: 'Dev Ops', id: 5 }, state: 'TX' } },
  { key: 'note', value: 'a JSON string, no fields' },
];

describe('queries over the example pluggable component (its own process)', () => {
  const env = useExampleSidecar([{ name: 'store', type: 'state.memstore' }], 'query-app');
  let rpc: ReturnType<typeof grpcQuery>;
  let url: string;
  const http = async (q: unknown, status = 200) => {
    const res = await fetch(url, json(q));
    expect(res.status).toBe(status);
    return (await res.json()) as QueryBody;
  };
  const keys = (b: QueryBody) => b.results.map((r) => r.key);

  beforeAll(async () => {
    url = `${env.base}/v1.0-alpha1/state/store/query`;
    rpc = grpcQuery(env.sidecar);
    const save = await fetch(`${env.base}/v1.0/state/store`, json(PEOPLE));
    expect(save.status).toBe(204);
  });
  afterAll(() => rpc?.close());

  it('metadata shows QUERY_API', async () => {
    const md = (await (await fetch(`${env.base}/v1.0/metadata`)).json()) as { components: { name: string; capabilities: string[] }[] };
    expect(md.components.find((c) => c.name === 'store')?.capabilities).toContain('QUERY_API');
  });

  it('EQ, IN, AND and OR filters over HTTP; keys come back without the app prefix, with data and etags', async () => {
    const eq = await http({ filter: { EQ: { 'person.org': 'Dev Ops' } } });
    expect(keys(eq)).toEqual(['p1', 'p3', 'p5']);
    expect(eq.results[0]).toEqual({ key: 'p1', data: PEOPLE[0].value, etag: expect.stringMatching(/^\d+$/) });
    expect(keys(await http({ filter: { IN: { state: ['CA', 'TX'] } } }))).toEqual(['p1', 'p4', 'p5']);
    expect(keys(await http({ filter: { AND: [{ EQ: { 'person.org': 'Dev Ops' } }, { IN: { state: ['WA', 'TX'] } }] } }))).toEqual(['p3', 'p5']);
    expect(keys(await http({ filter: { OR: [{ EQ: { state: 'CA' } }, { AND: [{ EQ: { 'person.org': 'Finance' } }, { EQ: { 'person.id': 2 } }] }] } }))).toEqual(['p1', 'p2']);
    expect(keys(await http({ filter: { EQ: { 'person.org': 'Nobody' } } }))).toEqual([]);
    // no filter: every item
    expect(keys(await http({}))).toEqual(['note', 'p1', 'p2', 'p3', 'p4', 'p5']);
  });

  it('sort and pages over HTTP: the component\'s own token is passed through, absent on the last page', async () => {
    const q = { filter: { OR: [{ EQ: { 'person.org': 'Dev Ops' } }, { EQ: { state: 'WA' } }] }, sort: [{ key: 'person.id', order: 'DESC' }], page: { limit: 2 } };
    const first = await http(q);
    expect(keys(first)).toEqual(['p5', 'p3']);
    expect(first.token).toBeTruthy();
    expect(first.token).not.toMatch(/^\d+$/); // not an offset rt could read: the component's own
    const second = await http({ ...q, page: { limit: 2, token: first.token } });
    expect(keys(second)).toEqual(['p2', 'p1']);
    expect(second.token).toBeUndefined();
    const ascending = { filter: { GT: { 'person.id': 0 } }, sort: [{ key: 'person.id' }], page: { limit: 3 } };
    const a1 = await http(ascending);
    expect(keys(a1)).toEqual(['p1', 'p2', 'p3']);
    const a2 = await http({ ...ascending, page: { limit: 3, token: a1.token } });
    expect(keys(a2)).toEqual(['p4', 'p5']);
    expect(a2.token).toBeUndefined();
  });

  it('the same over gRPC QueryStateAlpha1, page by page', async () => {
    const q = { filter: { IN: { 'person.org': ['Dev Ops', 'Hardware'] } }, sort: [{ key: 'person.id', order: 'ASC' }], page: { limit: 2, token: '' } };
    const seen: string[] = [];
    let token = '';
    let pages = 0;
    do {
      const page = await rpc.query('store', { ...q, page: { limit: 2, token } });
      for (const r of page.results) {
        expect(r.etag).toMatch(/^\d+$/);
        expect(r.error).toBe('');
        expect(JSON.parse(r.data.toString()).person.org).toMatch(/Dev Ops|Hardware/);
      }
      seen.push(...page.results.map((r) => r.key));
      token = page.token;
      pages++;
    } while (token && pages < 10);
    expect(seen).toEqual(['p1', 'p3', 'p4', 'p5']);
    expect(pages).toBe(2);
    const and = await rpc.query('store', { filter: { AND: [{ EQ: { state: 'WA' } }, { EQ: { 'person.id': 3 } }] } });
    expect(and.results.map((r) => r.key)).toEqual(['p3']);
  });

  it('a query the component refuses (a token it did not give out) is 400 ERR_STATE_QUERY with its message; INVALID_ARGUMENT over gRPC', async () => {
    const res = await fetch(url, json({ page: { limit: 1, token: 'not-mine' } }));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_STATE_QUERY');
    expect(body.message).toContain('not one this store gave out');
    const e = await rpc.fail('store', { page: { limit: 1, token: 'not-mine' } });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(errorCodeOf(e)).toBe('ERR_STATE_QUERY');
    // what rt itself refuses never reaches the component
    expect((await fetch(url, json({ filter: { LIKE: { a: 1 } } }))).status).toBe(400);
  });
});

describe('what a pluggable component receives, and stores that cannot query', () => {
  let dirs: TempDirs;
  let sidecar: Sidecar;
  let rpc: ReturnType<typeof grpcQuery>;
  const servers: grpc.Server[] = [];
  const received: { request: any; instance: string }[] = [];
  const calls = { sdkStyle: 0 };

  const stateStore = (features: string[]) => ({ Init: ok({}), Features: ok({ features }), Ping: ok({}) });

  beforeAll(async () => {
    dirs = tempDirs();
    const sock = (name: string) => join(dirs.sockets, `${name}.sock`);
    servers.push(
      // records the request and answers with the shapes the protocol allows
      await startTestServer(sock('wire'), {
        StateStore: stateStore(['ETAG', 'QUERY_API']),
        QueriableStateStore: {
          Query: (call: grpc.ServerUnaryCall<any, unknown>, cb: grpc.sendUnaryData<unknown>) => {
            received.push({ request: call.request, instance: String(call.metadata.get('x-component-instance')[0]) });
            cb(null, {
              items: [
                { key: 'wire-app||k1', data: Buffer.from('{"a":1}'), etag: { value: '7' }, error: '', contentType: 'application/json' },
                { key: 'other-app||k2', data: Buffer.from('{"a":2}'), etag: null, error: '', contentType: '' },
                { key: 'wire-app||k3', data: Buffer.alloc(0), etag: null, error: 'cannot read k3', contentType: '' },
              ],
              token: 'opaque/next==',
              metadata: { took: '3ms' },
            });
          },
        },
      }),
      // the pluggable SDKs serve QueriableStateStore for every store; one that cannot query does not report QUERY_API
      await startTestServer(sock('sdkstyle'), {
        StateStore: stateStore(['ETAG', 'TRANSACTIONAL']),
        TransactionalStateStore: { Transact: ok({}) },
        QueriableStateStore: {
          Query: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => {
            calls.sdkStyle++;
            cb({ code: grpc.status.UNIMPLEMENTED, details: 'method Query not implemented' });
          },
        },
      }),
      // claims QUERY_API without serving the service: the claim is dropped
      await startTestServer(sock('claims'), { StateStore: stateStore(['ETAG', 'QUERY_API']) }),
      await startTestServer(sock('broken'), {
        StateStore: stateStore(['QUERY_API']),
        QueriableStateStore: { Query: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.INTERNAL, details: 'index is rebuilding' }) },
      }),
    );
    writeComponents(dirs.resources, [
      { name: 'wire', type: 'state.wire' },
      { name: 'sdkstyle', type: 'state.sdkstyle' },
      { name: 'claims', type: 'state.claims' },
      { name: 'broken', type: 'state.broken' },
    ]);
    sidecar = await sidecarFor(dirs, 'wire-app');
    rpc = grpcQuery(sidecar);
  });
  afterAll(async () => {
    rpc?.close();
    await sidecar?.close();
    for (const s of servers) s.forceShutdown();
    dirs?.cleanup();
  });

  const base = () => `http://127.0.0.1:${sidecar.httpPort}/v1.0-alpha1/state`;

  it('the filter goes as the ecosystem sends it: operator → Any with no type URL and the argument as Go\'s JSON; sort, pagination and metadata as given', async () => {
    received.length = 0;
    const query = {
      filter: { AND: [{ EQ: { 'person.org': 'Dev & Ops <x>' } }, { IN: { state: ['CA', 'WA'] } }, { OR: [{ GT: { 'person.id': 1.5 } }, { LTE: { 'person.id': -1e-7 } }] }] },
      sort: [{ key: 'person.id', order: 'DESC' }, { key: 'state' }],
      page: { limit: 2, token: 'opaque/prev==' },
    };
    const res = await fetch(`${base()}/wire/query?metadata.partitionKey=p-1`, json(query));
    expect(res.status).toBe(200);
    const expected = {
      query: {
        filter: {
          AND: {
            type_url: '',
            value: Buffer.from('[{"EQ":{"person.org":"Dev \\u0026 Ops \\u003cx\\u003e"}},{"IN":{"state":["CA","WA"]}},{"OR":[{"GT":{"person.id":1.5}},{"LTE":{"person.id":-1e-7}}]}]'),
          },
        },
        sort: [
          { key: 'person.id', order: 'DESC' },
          { key: 'state', order: 'ASC' },
        ],
        pagination: { limit: '2', token: 'opaque/prev==' },
      },
      metadata: { partitionKey: 'p-1' },
    };
    expect(received).toEqual([{ request: expected, instance: 'wire' }]);
    // a Go component's json.Unmarshal of the Any's value gives back the query's own argument
    expect(JSON.parse(received[0].request.query.filter.AND.value.toString())).toEqual(query.filter.AND);

    // gRPC: the request's metadata; no filter is an empty map, no page is limit 0 and no token
    await rpc.query('wire', { sort: [{ key: 'a' }] }, { partitionKey: 'p-2' });
    expect(received[1].request).toEqual({ query: { filter: {}, sort: [{ key: 'a', order: 'ASC' }], pagination: { limit: '0', token: '' } }, metadata: { partitionKey: 'p-2' } });
    await rpc.query('wire', { filter: { EQ: { n: 12 } } });
    expect(received[2].request.query.filter).toEqual({ EQ: { type_url: '', value: Buffer.from('{"n":12}') } });
    expect(received[2].request.metadata).toEqual({});
  });

  it('the answer: keys without this app\'s prefix, etags, per-item errors, the token and metadata, over HTTP and gRPC', async () => {
    const res = await fetch(`${base()}/wire/query`, json({}));
    expect(await res.json()).toEqual({
      results: [
        { key: 'k1', data: { a: 1 }, etag: '7' },
        { key: 'other-app||k2', data: { a: 2 } },
        { key: 'k3', data: '', error: 'cannot read k3' },
      ],
      token: 'opaque/next==',
      metadata: { took: '3ms' },
    });
    const g = await rpc.query('wire', {});
    expect(g.results.map((r) => [r.key, r.data.toString(), r.etag, r.error])).toEqual([
      ['k1', '{"a":1}', '7', ''],
      ['other-app||k2', '{"a":2}', '', ''],
      ['k3', '', '', 'cannot read k3'],
    ]);
    expect(g.token).toBe('opaque/next==');
    expect(g.metadata).toEqual({ took: '3ms' });
  });

  it('a store without QUERY_API answers 400 ERR_STATE_STORE_NOT_SUPPORTED (INVALID_ARGUMENT over gRPC), and is never asked', async () => {
    for (const name of ['sdkstyle', 'claims']) {
      const store = sidecar.ctx.components.stateStore(name)!;
      expect(store.features()).not.toContain('QUERY_API');
      const res = await fetch(`${base()}/${name}/query`, json({ filter: { EQ: { a: 1 } } }));
      expect(res.status).toBe(400);
      expect(((await res.json()) as { errorCode: string }).errorCode).toBe('ERR_STATE_STORE_NOT_SUPPORTED');
      const e = await rpc.fail(name, {});
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(errorCodeOf(e)).toBe('ERR_STATE_STORE_NOT_SUPPORTED');
    }
    expect(calls.sdkStyle).toBe(0);
    const md = (await (await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/metadata`)).json()) as { components: { name: string; capabilities: string[] }[] };
    expect(md.components.find((c) => c.name === 'sdkstyle')?.capabilities).toEqual(['ETAG', 'TRANSACTIONAL']);
    expect(md.components.find((c) => c.name === 'wire')?.capabilities).toEqual(['ETAG', 'QUERY_API']);
  });

  it('a component error is 500 ERR_STATE_QUERY with its message (INTERNAL over gRPC); the sidecar stays up', async () => {
    const res = await fetch(`${base()}/broken/query`, json({ filter: { EQ: { a: 1 } } }));
    expect(res.status).toBe(500);
    const body = (await res.json()) as { errorCode: string; message: string };
    expect(body.errorCode).toBe('ERR_STATE_QUERY');
    expect(body.message).toContain('index is rebuilding');
    const e = await rpc.fail('broken', {});
    expect(e.code).toBe(grpc.status.INTERNAL);
    expect(errorCodeOf(e)).toBe('ERR_STATE_QUERY');
    expect(e.details).toContain('index is rebuilding');
    expect((await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/healthz`)).status).toBe(204);
  });
});

describe('the filter argument as Go\'s encoding/json writes it', () => {
  it('known encodings: sorted keys, HTML and separator escapes, float64 forms', () => {
    expect(goJson({ b: 1, a: '<&>' })).toBe('{"a":"\\u003c\\u0026\\u003e","b":1}');
    expect(goJson(['\u2028\u2029', '\u0001\b\f\n\r\t"\\', 'é😀'])).toBe('["\\u2028\\u2029","\\u0001\\b\\f\\n\\r\\t\\"\\\\","é😀"]');
    expect([1e21, 1e20, 1e-7, 0.000001, 1.5, -0, 0, 5e-324, 123456789012345680000].map(goJson)).toEqual([
      '1e+21', '100000000000000000000', '1e-7', '0.000001', '1.5', '-0', '0', '5e-324', '123456789012345680000',
    ]);
    expect(goJson({ é: 1, z: 2, '😀': 3, 'ﬀ': 4 })).toBe('{"z":2,"é":1,"ﬀ":4,"😀":3}');
    expect(goJson([null, true, false])).toBe('[null,true,false]');
  });

  it('property: any JSON value reads back the same', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(goJson(v))).toEqual(v);
      }),
    );
  });
});
