/**
 * Property: for any sequence of state API calls, a pluggable store (the example component over
 * its socket) answers exactly as the built-in state.in-memory does — same statuses, same error
 * codes, same values. Etag values differ between stores, so "current etag" means each store's own.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useExampleSidecar } from './helpers.ts';

type EtagKind = 'none' | 'current' | 'stale' | 'empty' | { junk: string };
type Op =
  | { op: 'save'; items: { key: string; value: unknown; ttl?: string; etag: EtagKind; firstWrite: boolean }[] }
  | { op: 'get'; key: string }
  | { op: 'delete'; key: string; etag: EtagKind }
  | { op: 'bulk'; keys: string[] }
  | { op: 'tx'; ops: { kind: 'upsert' | 'delete'; key: string; value: unknown; etag: EtagKind }[] };

const key = fc.constantFrom('a', 'b', 'c', 'sp ace', 'ü-é');
// mostly plain calls, so that values get stored and read back; the odd etag and TTL cases mixed in
const etag: fc.Arbitrary<EtagKind> = fc.oneof(
  { arbitrary: fc.constant<EtagKind>('none'), weight: 6 },
  { arbitrary: fc.constantFrom<EtagKind>('current', 'stale', 'empty'), weight: 3 },
  { arbitrary: fc.string({ maxLength: 6 }).map((junk): EtagKind => ({ junk })), weight: 1 },
);
const ttl = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 5 },
  { arbitrary: fc.constantFrom('-1', '0', '3600', ' 60 ', 'abc', '1e3', '-5', '99999999999'), weight: 1 },
);
const rarely = fc.oneof({ arbitrary: fc.constant(false), weight: 4 }, { arbitrary: fc.constant(true), weight: 1 });
const value = fc.jsonValue({ maxDepth: 2 });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('save' as const), items: fc.array(fc.record({ key, value, ttl, etag, firstWrite: rarely }), { minLength: 1, maxLength: 3 }) }),
  fc.record({ op: fc.constant('get' as const), key }),
  fc.record({ op: fc.constant('delete' as const), key, etag }),
  fc.record({ op: fc.constant('bulk' as const), keys: fc.array(key, { maxLength: 4 }) }),
  fc.record({ op: fc.constant('tx' as const), ops: fc.array(fc.record({ kind: fc.constantFrom('upsert' as const, 'delete' as const), key, value, etag }), { minLength: 1, maxLength: 3 }) }),
);

describe('pluggable store vs built-in store, over the state API (property)', () => {
  const env = useExampleSidecar(
    [
      { name: 'builtin', type: 'state.in-memory' },
      { name: 'plug', type: 'state.memstore' },
    ],
    'diff-app',
  );
  let round = 0;

  /** Runs one call against one store; returns what a client sees (etag values left out). */
  async function call(store: string, o: Op, prefix: string): Promise<unknown> {
    const base = `${env.base}/v1.0/state/${store}`;
    const k = (x: string) => prefix + x;
    const url = (x: string) => `${base}/${encodeURIComponent(k(x))}`;
    const etagOf = async (kind: EtagKind, x: string): Promise<string | undefined> => {
      if (kind === 'none') return undefined;
      if (kind === 'empty') return '';
      if (kind === 'stale') return '999999';
      if (kind === 'current') return (await fetch(url(x))).headers.get('etag') ?? '123456';
      return kind.junk;
    };
    const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    let res: Response;
    switch (o.op) {
      case 'save': {
        const items = [];
        for (const i of o.items) {
          items.push({
            key: k(i.key),
            value: i.value,
            etag: await etagOf(i.etag, i.key),
            metadata: i.ttl === undefined ? undefined : { ttlInSeconds: i.ttl },
            options: i.firstWrite ? { concurrency: 'first-write' } : undefined,
          });
        }
        res = await post('', items);
        break;
      }
      case 'get':
        res = await fetch(url(o.key));
        break;
      case 'delete': {
        const e = await etagOf(o.etag, o.key);
        res = await fetch(url(o.key), { method: 'DELETE', headers: e === undefined ? {} : { 'if-match': e } });
        break;
      }
      case 'bulk':
        res = await post('/bulk', { keys: o.keys.map(k) });
        break;
      case 'tx': {
        const operations = [];
        for (const t of o.ops) {
          const request: Record<string, unknown> = { key: k(t.key), etag: await etagOf(t.etag, t.key) };
          if (t.kind === 'upsert') request.value = t.value;
          operations.push({ operation: t.kind, request });
        }
        res = await post('/transaction', { operations });
        break;
      }
    }
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : '';
    } catch {
      // not JSON: compare the text
    }
    if (res.status >= 400) body = (body as { errorCode?: string }).errorCode;
    if (o.op === 'bulk' && Array.isArray(body)) {
      // etag values and expiry instants (ms apart) differ between the stores; their presence must not
      body = body.map((b: Record<string, unknown>) => ({
        ...b,
        etag: b.etag === undefined ? undefined : 'some',
        metadata: b.metadata && { ...(b.metadata as object), ttlExpireTime: (b.metadata as { ttlExpireTime?: string }).ttlExpireTime && 'some' },
      }));
    }
    return { status: res.status, body, hasEtag: res.headers.has('etag') };
  }

  it('answers every call sequence like state.in-memory', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 10 }), async (ops) => {
        const prefix = `r${round++}-`;
        for (const o of ops) {
          const builtin = await call('builtin', o, prefix);
          const plug = await call('plug', o, prefix);
          expect(plug, JSON.stringify(o)).toEqual(builtin);
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});
