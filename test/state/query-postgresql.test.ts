/**
 * The PostgreSQL store's SQL translation of the query language against the JavaScript
 * evaluation (the embedded stores' engine): the same data and queries must give the same
 * pages — fixed cases and fast-check random queries, on a real PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factory } from '../../sidecar/src/components/state/postgresql/index.ts';
import { parseQuery, runQuery, type QueryableStateStore } from '../../sidecar/src/components/state/query.ts';
import type { StateItem } from '../../sidecar/src/components/types.ts';
import { requireService } from '../services/ci.ts';
import { dropStateTables, postgresTarget } from '../services/postgres.ts';
import { componentContext, spec } from './helpers.ts';

const target = await postgresTarget();
const available = requireService('PostgreSQL', target.available, `nothing answers at ${target.host}:${target.port} (set RT_TEST_POSTGRES_URL)`);
const table = `rt_state_query_${randomBytes(4).toString('hex')}`;
const PREFIX = 'app||';

const docs: Record<string, unknown> = {
  d01: { person: { org: 'Dev Ops', id: 1036 }, state: 'WA', n: 3, tags: ['x', 'y'] },
  d02: { person: { org: 'Hardware', id: 1028 }, state: 'OR', n: 3.5, tags: ['y'] },
  d03: { person: { org: 'Finance', id: 1071 }, state: 'CA', n: -2, s: 'Zebra' },
  d04: { person: { org: 'Dev Ops', id: 1042 }, state: 'WA', n: 1e2, s: 'apple' },
  d05: { person: { org: 'Dev Ops', id: 1007 }, state: 'CA', n: null, s: 'Äpfel' },
  d06: { person: { org: null }, state: true, n: '3', s: 'apple' },
  d07: { person: 'flat', state: false, n: 0, s: '' },
  d08: { person: { id: 1036 }, n: 3, tags: [] },
  d09: 'just a string',
  d10: 42,
  d11: null,
  d12: [1, 2, { state: 'WA' }],
  d13: { state: 'WA', s: 'é', n: 2.25 },
  d14: { state: 'wa', s: 'E', n: 1e-3 },
};
const notJson = { key: `${PREFIX}d15`, value: Buffer.from([0xff, 0xfe, 0x7b]) };
const items: StateItem[] = [...Object.entries(docs).map(([k, v]) => ({ key: PREFIX + k, value: Buffer.from(JSON.stringify(v)) })), notJson];

const FIELDS = ['state', 'n', 's', 'person.org', 'person.id', 'person', 'tags.0', 'tags.-1', 'missing', '2.state'];
const scalar = fc.oneof(fc.constantFrom('WA', 'CA', 'wa', 'apple', 'Äpfel', 'é', 'E', '', 'Dev Ops', '3'), fc.constantFrom(3, 3.5, 0, -2, 100, 1036, 0.001), fc.boolean(), fc.constant(null));
const filter = fc.letrec((tie) => ({
  f: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.tuple(fc.constantFrom('EQ', 'NEQ', 'GT', 'GTE', 'LT', 'LTE'), fc.constantFrom(...FIELDS), scalar).map(([op, f, v]) => ({ [op]: { [f]: v } })),
    fc.tuple(fc.constantFrom(...FIELDS), fc.array(scalar, { minLength: 1, maxLength: 4 })).map(([f, vs]) => ({ IN: { [f]: vs } })),
    fc.tuple(fc.constantFrom('AND', 'OR'), fc.array(tie('f'), { minLength: 1, maxLength: 3 })).map(([op, fs]) => ({ [op]: fs })),
  ),
})).f;
const query = fc.record(
  {
    filter,
    sort: fc.array(fc.record({ key: fc.constantFrom(...FIELDS), order: fc.constantFrom('ASC', 'DESC') }), { maxLength: 3 }),
    page: fc.record({ limit: fc.integer({ min: 0, max: 5 }), token: fc.integer({ min: 0, max: 16 }).map(String) }),
  },
  { requiredKeys: [] },
);

describe.skipIf(!available)('state.postgresql query API against the JavaScript engine', () => {
  let store: QueryableStateStore;
  beforeAll(async () => {
    store = factory() as QueryableStateStore;
    await store.init(spec('state.postgresql', { connectionString: target.url, tableName: table }), componentContext);
    await store.bulkSet(items.map((i) => ({ key: i.key, value: i.value })));
    // keys of another app: never in the results
    await store.set({ key: 'other||d01', value: Buffer.from(JSON.stringify(docs.d01)) });
  });
  afterAll(async () => {
    await store?.close();
    await dropStateTables(target.url, [table]);
  });

  const same = async (q: unknown) => {
    const parsed = parseQuery(q);
    const want = runQuery(items, parsed);
    const got = await store.query(parsed, PREFIX);
    expect(got.results.map((r) => r.key), JSON.stringify(q)).toEqual(want.results.map((r) => r.key));
    expect(got.token, JSON.stringify(q)).toBe(want.token);
  };

  it('answers the fixed cases like the JavaScript engine', async () => {
    await same({});
    await same({ filter: { EQ: { 'person.org': 'Dev Ops' } }, sort: [{ key: 'person.id', order: 'DESC' }] });
    await same({ filter: { IN: { state: ['CA', 'WA', true] } }, sort: [{ key: 'n' }], page: { limit: 2, token: '1' } });
    await same({ filter: { GT: { n: 2 } } });
    await same({ filter: { LT: { s: 'a' } }, sort: [{ key: 's', order: 'ASC' }] });
    await same({ filter: { NEQ: { state: 'WA' } } });
    await same({ filter: { OR: [{ EQ: { 'tags.0': 'y' } }, { EQ: { 'tags.-1': 'y' } }] } });
    await same({ sort: [{ key: 'state' }, { key: 'n', order: 'DESC' }] });
    await same({ sort: [{ key: 's', order: 'DESC' }], page: { limit: 3 } });
  });

  it('agrees with the JavaScript engine on random queries', async () => {
    await fc.assert(fc.asyncProperty(query, same), { numRuns: 500 });
  });

  it('never fails on any query the parser accepts (odd paths and texts included)', async () => {
    const text = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom("'", '"', '\\', '{}', ',', '$1', 'a.b', '-0'));
    const value = fc.oneof(text, fc.double(), fc.integer(), fc.boolean(), fc.constant(null));
    const anyFilter = fc.letrec((tie) => ({
      f: fc.oneof(
        { depthSize: 'small' },
        fc.tuple(fc.constantFrom('EQ', 'NEQ', 'GT', 'GTE', 'LT', 'LTE'), text, value).map(([op, f, v]) => ({ [op]: { [f]: v } })),
        fc.tuple(text, fc.array(value, { maxLength: 3 })).map(([f, vs]) => ({ IN: { [f]: vs } })),
        fc.tuple(fc.constantFrom('AND', 'OR'), fc.array(tie('f'), { minLength: 1, maxLength: 3 })).map(([op, fs]) => ({ [op]: fs })),
      ),
    })).f;
    await fc.assert(
      fc.asyncProperty(anyFilter, fc.array(fc.record({ key: text, order: fc.constantFrom('ASC', 'DESC') }), { maxLength: 2 }), async (f, sort) => {
        let parsed;
        try {
          parsed = parseQuery({ filter: f, sort });
        } catch {
          return; // refused with a 400 before any store sees it
        }
        await store.query(parsed, PREFIX);
      }),
      { numRuns: 300 },
    );
  });

  it('is reported as QUERY_API', () => {
    expect(store.capabilities()).toContain('QUERY_API');
  });
});
