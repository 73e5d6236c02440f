import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HashRing, PlacementRings, hash32, type RingHost } from '../../placement/src/hashing.ts';

const host = (i: number): RingHost => ({ name: `10.0.${i >> 8}.${i & 255}:50002`, id: `app-${i % 3}` });
const hostsArb = fc.uniqueArray(fc.integer({ min: 0, max: 5000 }), { minLength: 1, maxLength: 12 }).map((ns) => ns.map(host));
const idsArb = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 20 }), { minLength: 1, maxLength: 200 });

describe('consistent hashing', () => {
  it('hash32 is a fixed function (the same on every host and version)', () => {
    // pinned: a change here re-homes every actor of a mixed-version cluster
    expect(['', 'a', 'actor-1', '10.0.0.1:50002#7'].map(hash32)).toEqual([2872998923, 444641715, 2431965674, 1665717606]);
    expect(hash32('a')).not.toBe(hash32('b'));
    expect(Number.isInteger(hash32('x')) && hash32('x') >= 0 && hash32('x') < 2 ** 32).toBe(true);
  });

  it('every actor maps to a host of its type, whatever the order the hosts came in', () => {
    fc.assert(
      fc.property(hostsArb, idsArb, fc.integer({ min: 1, max: 50 }), (hosts, ids, rf) => {
        const ring = new HashRing(hosts, rf);
        const shuffled = new HashRing([...hosts].reverse(), rf);
        const names = new Set(hosts.map((h) => h.name));
        for (const id of ids) {
          const owner = ring.get(id);
          expect(owner && names.has(owner.name)).toBe(true);
          expect(shuffled.get(id)?.name).toBe(owner?.name);
        }
      }),
    );
  });

  it('per type: an actor goes to a host of its own type, and a type without hosts has none', () => {
    fc.assert(
      fc.property(hostsArb, hostsArb, idsArb, (a, b, ids) => {
        const rings = new PlacementRings({ cat: a, dog: b, none: [] });
        for (const id of ids) {
          expect(a.map((h) => h.name)).toContain(rings.lookup('cat', id)?.name);
          expect(b.map((h) => h.name)).toContain(rings.lookup('dog', id)?.name);
          expect(rings.lookup('none', id)).toBeUndefined();
          expect(rings.lookup('bird', id)).toBeUndefined();
        }
      }),
    );
  });

  it('removing a host moves only its actors', () => {
    fc.assert(
      fc.property(hostsArb.filter((h) => h.length >= 2), idsArb, fc.nat(), (hosts, ids, k) => {
        const gone = hosts[k % hosts.length]!;
        const before = new HashRing(hosts);
        const after = new HashRing(hosts.filter((h) => h !== gone));
        for (const id of ids) {
          const was = before.get(id)!.name;
          if (was !== gone.name) expect(after.get(id)!.name).toBe(was);
          else expect(after.get(id)!.name).not.toBe(gone.name);
        }
      }),
    );
  });

  it('adding a host moves actors only to it, about 1/n of them', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 1000 }), (n, seed) => {
        const hosts = Array.from({ length: n }, (_, i) => host(seed + i));
        const added = host(seed + n);
        const before = new HashRing(hosts);
        const after = new HashRing([...hosts, added]);
        const ids = Array.from({ length: 4000 }, (_, i) => `actor-${seed}-${i}`);
        let moved = 0;
        for (const id of ids) {
          const a = after.get(id)!.name;
          if (a !== before.get(id)!.name) {
            moved++;
            expect(a).toBe(added.name);
          }
        }
        // expected 1/(n+1) of the ids; 100 virtual nodes keep it within a loose band
        const share = moved / ids.length;
        expect(share).toBeGreaterThan(0.4 / (n + 1));
        expect(share).toBeLessThan(1.8 / (n + 1));
      }),
      { numRuns: 30 },
    );
  });

  it('spreads actors evenly enough over 10 hosts', () => {
    const ring = new HashRing(Array.from({ length: 10 }, (_, i) => host(i)));
    const counts = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      const h = ring.get(`id-${i}`)!.name;
      counts.set(h, (counts.get(h) ?? 0) + 1);
    }
    expect(counts.size).toBe(10);
    for (const c of counts.values()) {
      expect(c).toBeGreaterThan(2000 * 0.6);
      expect(c).toBeLessThan(2000 * 1.4);
    }
  });

  it('refuses a replication factor below 1', () => {
    expect(() => new HashRing([host(1)], 0)).toThrow(/replication factor/);
    expect(new HashRing([]).get('x')).toBeUndefined();
  });
});
