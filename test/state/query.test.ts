/** The state query API (alpha): the query language, and the endpoint on in-memory and SQLite. */
import { CommunicationProtocolEnum, DaprClient, LogLevel } from '@dapr/dapr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StateRequestError } from '../../sidecar/src/components/state/errors.ts';
import { parseQuery, runQuery } from '../../sidecar/src/components/state/query.ts';
import { startStateSidecar, type StateSidecar } from './sidecar.ts';

const people = [
  { key: 'p1', value: { person: { org: 'Dev Ops', id: 1036 }, city: 'Seattle', state: 'WA' } },
  { key: 'p2', value: { person: { org: 'Hardware', id: 1028 }, city: 'Portland', state: 'OR' } },
  { key: 'p3', value: { person: { org: 'Finance', id: 1071 }, city: 'Sacramento', state: 'CA' } },
  { key: 'p4', value: { person: { org: 'Dev Ops', id: 1042 }, city: 'Spokane', state: 'WA' } },
  { key: 'p5', value: { person: { org: 'Dev Ops', id: 1007 }, city: 'San Francisco', state: 'CA' } },
  { key: 'p6', value: 'not an object' },
];
const items = people.map((p) => ({ key: p.key, value: Buffer.from(JSON.stringify(p.value)), etag: '1' }));
const keysOf = (q: unknown) => runQuery(items, parseQuery(q)).results.map((r) => r.key);

describe('query language', () => {
  it('filters with EQ, NEQ, IN, comparisons, AND and OR over field paths', () => {
    expect(keysOf({ filter: { EQ: { 'person.org': 'Dev Ops' } } })).toEqual(['p1', 'p4', 'p5']);
    expect(keysOf({ filter: { IN: { state: ['CA', 'OR'] } } })).toEqual(['p2', 'p3', 'p5']);
    expect(keysOf({ filter: { AND: [{ EQ: { 'person.org': 'Dev Ops' } }, { EQ: { state: 'WA' } }] } })).toEqual(['p1', 'p4']);
    expect(keysOf({ filter: { OR: [{ EQ: { city: 'Portland' } }, { GT: { 'person.id': 1050 } }] } })).toEqual(['p2', 'p3']);
    expect(keysOf({ filter: { LTE: { 'person.id': 1028 } } })).toEqual(['p2', 'p5']);
    expect(keysOf({ filter: { NEQ: { state: 'WA' } } })).toEqual(['p2', 'p3', 'p5', 'p6']);
    expect(keysOf({})).toEqual(['p1', 'p2', 'p3', 'p4', 'p5', 'p6']);
  });

  it('sorts by several keys and pages with tokens', () => {
    expect(keysOf({ sort: [{ key: 'state', order: 'DESC' }, { key: 'person.id' }] })).toEqual(['p1', 'p4', 'p2', 'p5', 'p3', 'p6']);
    const q = { filter: { EQ: { 'person.org': 'Dev Ops' } }, sort: [{ key: 'person.id' }], page: { limit: 2 } };
    const first = runQuery(items, parseQuery(q));
    expect(first.results.map((r) => r.key)).toEqual(['p5', 'p1']);
    expect(first.token).toBe('2');
    const second = runQuery(items, parseQuery({ ...q, page: { limit: 2, token: first.token } }));
    expect(second.results.map((r) => r.key)).toEqual(['p4']);
    expect(second.token).toBeUndefined();
  });

  it('rejects what it cannot evaluate', () => {
    for (const bad of [
      { filter: { LIKE: { a: 'x' } } },
      { filter: { EQ: { a: 1, b: 2 } } },
      { filter: { EQ: { a: { nested: true } } } },
      { filter: { IN: { a: 'x' } } },
      { filter: { AND: [] } },
      { filter: { EQ: { 'a..b': 1 } } },
      { sort: [{ key: 'a', order: 'UP' }] },
      { page: { limit: -1 } },
      { page: { token: 'abc' } },
      { filter: { EQ: { a: 'nul\0' } } },
      { filter: { IN: { a: ['\ud800'] } } },
      { filter: { EQ: { 'a\0': 1 } } },
      'query',
    ]) {
      expect(() => parseQuery(bad), JSON.stringify(bad)).toThrow(StateRequestError);
    }
    let deep: unknown = { EQ: { a: 1 } };
    for (let i = 0; i < 40; i++) deep = { AND: [deep] };
    expect(() => parseQuery({ filter: deep })).toThrow(/deeper/);
  });
});

describe('POST /v1.0-alpha1/state/<store>/query', () => {
  let s: StateSidecar;
  beforeAll(async () => {
    s = await startStateSidecar('q', [
      { name: 'mem', type: 'state.in-memory' },
      { name: 'lite', type: 'state.sqlite', metadata: { connectionString: ':memory:' } },
    ]);
    for (const store of ['mem', 'lite']) {
      await fetch(`${s.base}/v1.0/state/${store}`, { method: 'POST', body: JSON.stringify(people) });
      // another app's item in the same store must not show up
      await s.sidecar.ctx.components.stateStore(store)!.set({ key: 'other||p9', value: Buffer.from(JSON.stringify({ person: { org: 'Dev Ops', id: 1 } })) });
    }
  });
  afterAll(async () => s?.stop());

  it.each(['mem', 'lite'])('answers {results, token} on %s with the caller’s keys', async (store) => {
    const r = await fetch(`${s.base}/v1.0-alpha1/state/${store}/query`, {
      method: 'POST',
      body: JSON.stringify({ filter: { EQ: { 'person.org': 'Dev Ops' } }, sort: [{ key: 'person.id', order: 'DESC' }], page: { limit: 2 } }),
    });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { results: { key: string; data: { person: { id: number } }; etag: string }[]; token?: string };
    expect(body.results.map((x) => [x.key, x.data.person.id])).toEqual([['p4', 1042], ['p1', 1036]]);
    expect(body.results[0].etag).toMatch(/^\d+$/);
    expect(body.token).toBe('2');
  });

  it('works through the @dapr/dapr SDK', async () => {
    const noop = () => undefined;
    const client = new DaprClient({
      daprHost: '127.0.0.1',
      daprPort: String(s.sidecar.httpPort),
      communicationProtocol: CommunicationProtocolEnum.HTTP,
      logger: { level: LogLevel.Error, service: { error: noop, warn: noop, info: noop, verbose: noop, debug: noop } },
    });
    const res = await client.state.query('lite', { filter: { IN: { state: ['CA'] } }, sort: [{ key: 'person.id', order: 'ASC' }], page: { limit: 10 } } as never);
    expect(res.results.map((x) => x.key)).toEqual(['p5', 'p3']);
  });

  it('answers 400 for a malformed query and for a store without the query API', async () => {
    const bad = await fetch(`${s.base}/v1.0-alpha1/state/mem/query`, { method: 'POST', body: '{"filter":{"LIKE":{"a":"b"}}}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errorCode: string }).errorCode).toBe('ERR_MALFORMED_REQUEST');
    const unknown = await fetch(`${s.base}/v1.0-alpha1/state/nope/query`, { method: 'POST', body: '{}' });
    expect(unknown.status).toBe(400);
  });
});
