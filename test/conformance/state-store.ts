/**
 * The conformance suite every state store passes: built-in ones (test/state/*.test.ts) and
 * pluggable ones behind a socket. It talks to the StateStore interface only, so whatever a
 * store is made of, the state API behaves the same on top of it.
 *
 * Keys carry a random prefix and every key written is deleted again after the suite, so the
 * suite can share a Redis database or table with other tests.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { IN_MEMORY_ETAG_RULES, type EtagRules } from '../../sidecar/src/components/state/common.ts';
import { EtagInvalidError, EtagMismatchError } from '../../sidecar/src/components/state/errors.ts';
import type { StateFeature, StateSetRequest, StateStore } from '../../sidecar/src/components/types.ts';

const text = (s: string) => Buffer.from(s, 'utf8');
const str = (v: Uint8Array | undefined) => (v === undefined ? undefined : Buffer.from(v).toString('utf8'));

/** `rules`: where the reference stores differ, the ones of this store's counterpart (docs/state.md). */
export function describeStateStoreConformance(label: string, open: () => Promise<StateStore>, close: (s: StateStore) => Promise<void>, rules: EtagRules = IN_MEMORY_ETAG_RULES): void {
  describe(`state store conformance: ${label}`, () => {
    let store: StateStore;
    let features: StateFeature[] = [];
    const prefix = `conf-${randomBytes(4).toString('hex')}-`;
    const written = new Set<string>();
    const k = (name: string) => {
      const key = prefix + name;
      written.add(key);
      return key;
    };
    /** Runs a feature's checks, or proves the store does not claim the feature. */
    const withFeature = async (f: StateFeature, fn: () => Promise<void>) => {
      if (!features.includes(f)) {
        expect(store.capabilities()).not.toContain(f);
        return;
      }
      await fn();
    };

    beforeAll(async () => {
      store = await open();
      features = store.features();
    });

    afterAll(async () => {
      if (!store) return;
      await store.bulkDelete([...written].map((key) => ({ key }))).catch(() => undefined);
      await close(store);
    });

    it('reports capabilities consistent with its features', () => {
      const caps = store.capabilities();
      for (const c of caps) expect(['ETAG', 'TRANSACTIONAL', 'ACTOR', 'QUERY_API', 'TTL']).toContain(c);
      if (features.includes('ACTOR')) {
        expect(features).toContain('ETAG');
        expect(features).toContain('TRANSACTIONAL');
      }
      if (features.includes('TRANSACTIONAL')) expect(typeof store.transact).toBe('function');
    });

    it('get of a missing key is undefined', async () => {
      expect(await store.get(k('missing'))).toBeUndefined();
    });

    it('set then get returns the same bytes and an etag', async () => {
      const key = k('a');
      await store.set({ key, value: text('{"n":1}') });
      const item = await store.get(key);
      expect(str(item?.value)).toBe('{"n":1}');
      await withFeature('ETAG', async () => {
        expect(typeof item?.etag).toBe('string');
        expect(item?.etag).not.toBe('');
      });
    });

    it('overwrite replaces the value and changes the etag', async () => {
      const key = k('overwrite');
      await store.set({ key, value: text('"one"') });
      const first = await store.get(key);
      await store.set({ key, value: text('"two"') });
      const second = await store.get(key);
      expect(str(second?.value)).toBe('"two"');
      await withFeature('ETAG', async () => expect(second?.etag).not.toBe(first?.etag));
    });

    it('delete removes; deleting a missing key succeeds', async () => {
      const key = k('del');
      await store.set({ key, value: text('1') });
      await store.delete({ key });
      expect(await store.get(key)).toBeUndefined();
      await store.delete({ key });
      await store.delete({ key: k('never-written') });
    });

    it('bulkSet and bulkGet keep positions; missing keys are undefined', async () => {
      const keys = [k('b1'), k('b2'), k('b3')];
      await store.bulkSet([
        { key: keys[0], value: text('1') },
        { key: keys[2], value: text('3') },
      ]);
      const got = await store.bulkGet(keys);
      expect(got).toHaveLength(3);
      expect(str(got[0]?.value)).toBe('1');
      expect(got[1]).toBeUndefined();
      expect(str(got[2]?.value)).toBe('3');
      expect(await store.bulkGet([])).toEqual([]);
      await store.bulkDelete([{ key: keys[0] }, { key: keys[2] }]);
      expect((await store.bulkGet(keys)).every((x) => x === undefined)).toBe(true);
    });

    it('a write with the current etag succeeds; with a stale etag it fails and changes nothing', async () => {
      await withFeature('ETAG', async () => {
        const key = k('etag');
        await store.set({ key, value: text('"v1"') });
        const v1 = await store.get(key);
        await store.set({ key, value: text('"v2"'), etag: v1?.etag });
        const v2 = await store.get(key);
        expect(str(v2?.value)).toBe('"v2"');
        expect(v2?.etag).not.toBe(v1?.etag);
        await expect(store.set({ key, value: text('"v3"'), etag: v1?.etag })).rejects.toBeInstanceOf(EtagMismatchError);
        const after = await store.get(key);
        expect(str(after?.value)).toBe('"v2"');
        expect(after?.etag).toBe(v2?.etag);
      });
    });

    it(`a write or delete with an etag on a missing key: ${rules.etagOnMissingKey === 'accept' ? 'accepted (written / nothing to delete)' : 'an etag mismatch'}`, async () => {
      await withFeature('ETAG', async () => {
        const key = k('etag-missing');
        await store.set({ key, value: text('1') });
        const etag = (await store.get(key))?.etag;
        await store.delete({ key });
        if (rules.etagOnMissingKey === 'accept') {
          await store.delete({ key, etag });
          await store.set({ key, value: text('2'), etag });
          expect(str((await store.get(key))?.value)).toBe('2');
          await store.delete({ key });
          return;
        }
        await expect(store.set({ key, value: text('2'), etag })).rejects.toBeInstanceOf(EtagMismatchError);
        await expect(store.delete({ key, etag })).rejects.toBeInstanceOf(EtagMismatchError);
        expect(await store.get(key)).toBeUndefined();
      });
    });

    it('a malformed etag is rejected as invalid', async () => {
      await withFeature('ETAG', async () => {
        const key = k('etag-invalid');
        await store.set({ key, value: text('1') });
        await expect(store.set({ key, value: text('2'), etag: 'not an etag!' })).rejects.toBeInstanceOf(EtagInvalidError);
        await expect(store.delete({ key, etag: 'not an etag!' })).rejects.toBeInstanceOf(EtagInvalidError);
        expect(str((await store.get(key))?.value)).toBe('1');
      });
    });

    it('delete with a stale etag fails; with the current etag it deletes', async () => {
      await withFeature('ETAG', async () => {
        const key = k('etag-del');
        await store.set({ key, value: text('1') });
        const old = (await store.get(key))?.etag;
        await store.set({ key, value: text('2') });
        await expect(store.delete({ key, etag: old })).rejects.toBeInstanceOf(EtagMismatchError);
        expect(str((await store.get(key))?.value)).toBe('2');
        await store.delete({ key, etag: (await store.get(key))?.etag });
        expect(await store.get(key)).toBeUndefined();
      });
    });

    it('an empty etag counts as no etag', async () => {
      const key = k('etag-empty');
      await store.set({ key, value: text('1'), etag: '' });
      await store.set({ key, value: text('2'), etag: '' });
      expect(str((await store.get(key))?.value)).toBe('2');
    });

    it('first-write without an etag creates a missing key but never overwrites one', async () => {
      await withFeature('ETAG', async () => {
        const key = k('first-write');
        const fw: StateSetRequest['options'] = { concurrency: 'first-write' };
        await store.set({ key, value: text('"first"'), options: fw });
        await expect(store.set({ key, value: text('"second"'), options: fw })).rejects.toBeInstanceOf(EtagMismatchError);
        expect(str((await store.get(key))?.value)).toBe('"first"');
        const etag = (await store.get(key))?.etag;
        await store.set({ key, value: text('"third"'), etag, options: fw });
        expect(str((await store.get(key))?.value)).toBe('"third"');
        // last-write (the default) overwrites without an etag
        await store.set({ key, value: text('"fourth"'), options: { concurrency: 'last-write' } });
        expect(str((await store.get(key))?.value)).toBe('"fourth"');
      });
    });

    it(`first-write delete without an etag ${rules.firstWriteGuardsDelete ? 'removes nothing that exists' : 'deletes'}`, async () => {
      await withFeature('ETAG', async () => {
        const key = k('first-write-del');
        const fw: StateSetRequest['options'] = { concurrency: 'first-write' };
        await store.set({ key, value: text('1') });
        if (!rules.firstWriteGuardsDelete) {
          await store.delete({ key, options: fw });
          expect(await store.get(key)).toBeUndefined();
          return;
        }
        await expect(store.delete({ key, options: fw })).rejects.toBeInstanceOf(EtagMismatchError);
        expect(str((await store.get(key))?.value)).toBe('1');
        await store.delete({ key, etag: (await store.get(key))?.etag, options: fw });
        expect(await store.get(key)).toBeUndefined();
        await store.delete({ key, options: fw });
      });
    });

    it('a transaction applies upserts and deletes in order', async () => {
      await withFeature('TRANSACTIONAL', async () => {
        const [a, b, c] = [k('tx-a'), k('tx-b'), k('tx-c')];
        await store.set({ key: b, value: text('"old b"') });
        await store.transact!([
          { operation: 'upsert', request: { key: a, value: text('"a"') } },
          { operation: 'delete', request: { key: b } },
          { operation: 'upsert', request: { key: c, value: text('"c1"') } },
          { operation: 'upsert', request: { key: c, value: text('"c2"') } },
        ]);
        const got = await store.bulkGet([a, b, c]);
        expect(str(got[0]?.value)).toBe('"a"');
        expect(got[1]).toBeUndefined();
        expect(str(got[2]?.value)).toBe('"c2"');
        // upsert then delete of one key leaves nothing
        await store.transact!([
          { operation: 'upsert', request: { key: a, value: text('"again"') } },
          { operation: 'delete', request: { key: a } },
        ]);
        expect(await store.get(a)).toBeUndefined();
      });
    });

    it('a transaction with a failing operation changes nothing', async () => {
      await withFeature('TRANSACTIONAL', async () => {
        const [a, b, c] = [k('txr-a'), k('txr-b'), k('txr-c')];
        await store.bulkSet([
          { key: a, value: text('"a0"') },
          { key: b, value: text('"b0"') },
        ]);
        const before = await store.bulkGet([a, b]);
        const ops = [
          { operation: 'upsert' as const, request: { key: a, value: text('"a1"') } },
          { operation: 'delete' as const, request: { key: b } },
          { operation: 'upsert' as const, request: { key: c, value: text('"c1"') } },
        ];
        if (features.includes('ETAG')) {
          await expect(
            store.transact!([...ops, { operation: 'upsert', request: { key: a, value: text('"x"'), etag: '999999999' } }]),
          ).rejects.toBeInstanceOf(EtagMismatchError);
          await expect(store.transact!([...ops, { operation: 'delete', request: { key: b, etag: 'bad etag' } }])).rejects.toBeInstanceOf(EtagInvalidError);
        }
        await expect(store.transact!([...ops, { operation: 'upsert', request: { key: a, value: text('1'), metadata: { ttlInSeconds: 'soon' } } }])).rejects.toThrow();
        const after = await store.bulkGet([a, b, c]);
        expect(str(after[0]?.value)).toBe('"a0"');
        expect(after[0]?.etag).toBe(before[0]?.etag);
        expect(str(after[1]?.value)).toBe('"b0"');
        expect(after[2]).toBeUndefined();
      });
    });

    it('a transaction checks etags against the state left by its earlier operations', async () => {
      await withFeature('TRANSACTIONAL', async () => {
        await withFeature('ETAG', async () => {
          const key = k('tx-etag');
          await store.set({ key, value: text('1') });
          const etag = (await store.get(key))?.etag;
          await store.transact!([
            { operation: 'upsert', request: { key, value: text('2'), etag } },
            { operation: 'upsert', request: { key: k('tx-etag-other'), value: text('x') } },
          ]);
          expect(str((await store.get(key))?.value)).toBe('2');
          // the first op consumed the etag: a second op with the same etag must fail the whole thing
          const etag2 = (await store.get(key))?.etag;
          await expect(
            store.transact!([
              { operation: 'upsert', request: { key, value: text('3'), etag: etag2 } },
              { operation: 'upsert', request: { key, value: text('4'), etag: etag2 } },
            ]),
          ).rejects.toBeInstanceOf(EtagMismatchError);
          expect(str((await store.get(key))?.value)).toBe('2');
        });
      });
    });

    it('items with ttlInSeconds expire; a later write without it keeps the item', async () => {
      await withFeature('TTL', async () => {
        const [short, kept, long] = [k('ttl-short'), k('ttl-kept'), k('ttl-long')];
        // kept's ttl write comes first: once short has expired, kept would have too, had it kept it
        await store.set({ key: kept, value: text('"v1"'), metadata: { ttlInSeconds: '1' } });
        await store.set({ key: kept, value: text('"v2"') });
        await store.set({ key: short, value: text('"bye"'), metadata: { ttlInSeconds: '1' } });
        await store.set({ key: long, value: text('"stay"'), metadata: { ttlInSeconds: '3600' } });
        expect(str((await store.get(short))?.value)).toBe('"bye"');
        // the store's own clock expires it: looked at until it is gone
        await vi.waitFor(async () => expect(await store.get(short)).toBeUndefined(), { timeout: 10_000, interval: 50 });
        expect((await store.bulkGet([short]))[0]).toBeUndefined();
        expect(str((await store.get(kept))?.value)).toBe('"v2"');
        expect(str((await store.get(long))?.value)).toBe('"stay"');
        // an expired item is absent for etag checks too
        await store.set({ key: short, value: text('"new"'), options: { concurrency: 'first-write' } });
        expect(str((await store.get(short))?.value)).toBe('"new"');
      });
    }, 15_000);

    it('ttlInSeconds -1 or 0 means no expiry; a malformed ttlInSeconds is rejected', async () => {
      await withFeature('TTL', async () => {
        const key = k('ttl-none');
        await store.set({ key, value: text('1'), metadata: { ttlInSeconds: '-1' } });
        await store.set({ key, value: text('2'), metadata: { ttlInSeconds: '0' } });
        expect(str((await store.get(key))?.value)).toBe('2');
        await expect(store.set({ key, value: text('3'), metadata: { ttlInSeconds: 'ten' } })).rejects.toThrow();
        await expect(store.set({ key, value: text('3'), metadata: { ttlInSeconds: '-5' } })).rejects.toThrow();
        expect(str((await store.get(key))?.value)).toBe('2');
      });
    });

    it('stores any bytes: every byte value, empty values, a 1 MiB value', async () => {
      const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const big = randomBytes(1024 * 1024);
      await store.bulkSet([
        { key: k('bin'), value: all },
        { key: k('empty'), value: new Uint8Array() },
        { key: k('big'), value: big },
      ]);
      const [b, e, g] = await store.bulkGet([k('bin'), k('empty'), k('big')]);
      expect(Buffer.from(b!.value).equals(all)).toBe(true);
      expect(e).toBeDefined();
      expect(e!.value.byteLength).toBe(0);
      expect(Buffer.from(g!.value).equals(big)).toBe(true);
    });

    it('keeps unicode, separator-laden and long keys apart', async () => {
      const keys = [k('ключ-🔑-鍵'), k('a||b'), k('a|b'), k('with space/and/slash'), k('x'.repeat(900)), k('\u00e9'), k('e\u0301')];
      await store.bulkSet(keys.map((key, i) => ({ key, value: text(String(i)) })));
      const got = await store.bulkGet(keys);
      expect(got.map((g) => str(g?.value))).toEqual(keys.map((_, i) => String(i)));
      for (const key of keys) expect(str((await store.get(key))?.value)).toBe(String(keys.indexOf(key)));
    });

    it('of concurrent writers holding the same etag exactly one wins', async () => {
      await withFeature('ETAG', async () => {
        const key = k('race');
        await store.set({ key, value: text('0') });
        const etag = (await store.get(key))?.etag;
        const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.set({ key, value: text(String(i + 1)), etag })));
        const won = results.filter((r) => r.status === 'fulfilled');
        expect(won).toHaveLength(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(EtagMismatchError);
      });
    });

    it('optimistic read-modify-write loops lose no update', async () => {
      await withFeature('ETAG', async () => {
        const key = k('counter');
        await store.set({ key, value: text('0') });
        const incr = async () => {
          for (;;) {
            const cur = await store.get(key);
            const n = Number(str(cur?.value));
            try {
              await store.set({ key, value: text(String(n + 1)), etag: cur?.etag });
              return;
            } catch (e) {
              if (!(e instanceof EtagMismatchError)) throw e;
            }
          }
        };
        await Promise.all(Array.from({ length: 5 }, async () => {
          for (let i = 0; i < 4; i++) await incr();
        }));
        expect(str((await store.get(key))?.value)).toBe('20');
      });
    });
  });
}
