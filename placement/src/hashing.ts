/**
 * Consistent hashing of actor ids onto the hosts of their type. Every host builds the same ring
 * from the same table, so every host names the same owner without asking anyone. Each host sits
 * on the ring at `replicationFactor` points (virtual nodes, 100 by default as in the reference
 * runtime); an id belongs to the first point at or after its hash, wrapping around. Removing a
 * host moves only the ids that were on its points; adding one takes about 1/n of the ids.
 *
 * The hash is FNV-1a over the UTF-16 code units followed by murmur3's 32-bit finalizer (FNV
 * alone spreads near-identical strings such as "host#1", "host#2" poorly). It is rt's own: the
 * ring needs only to agree between rt hosts, not with the reference runtime's.
 */

export const DEFAULT_REPLICATION_FACTOR = 100;

export interface RingHost {
  /** host:port of its internal invocation server; unique in a table. */
  name: string;
  /** Its app id. */
  id: string;
  pod?: string;
}

/** A 32-bit hash of `s`, the same on every host and every run. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class HashRing {
  readonly hosts: readonly RingHost[];
  /** Ring points, ascending. */
  private readonly points: Uint32Array;
  /** owners[i]: index in `hosts` of the host at points[i]. */
  private readonly owners: Uint16Array | Uint32Array;

  /** `hosts` in any order (the ring depends only on the set); names must be unique. */
  constructor(hosts: readonly RingHost[], replicationFactor = DEFAULT_REPLICATION_FACTOR) {
    if (!Number.isInteger(replicationFactor) || replicationFactor < 1) throw new RangeError(`replication factor must be a whole number >= 1, got ${replicationFactor}`);
    this.hosts = [...hosts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const n = this.hosts.length * replicationFactor;
    const raw = new Uint32Array(n);
    const order = new Uint32Array(n);
    for (let h = 0; h < this.hosts.length; h++) {
      const name = this.hosts[h]!.name;
      for (let v = 0; v < replicationFactor; v++) {
        const i = h * replicationFactor + v;
        raw[i] = hash32(`${name}#${v}`);
        order[i] = i;
      }
    }
    // ties (two hosts on one point) go to the host first by name, so every host agrees
    order.sort((a, b) => raw[a]! - raw[b]! || a - b);
    this.points = new Uint32Array(n);
    this.owners = this.hosts.length <= 0xffff ? new Uint16Array(n) : new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      this.points[i] = raw[order[i]!]!;
      this.owners[i] = Math.floor(order[i]! / replicationFactor);
    }
  }

  /** The host that owns `key`; undefined on an empty ring. */
  get(key: string): RingHost | undefined {
    const n = this.points.length;
    if (n === 0) return undefined;
    const h = hash32(key);
    // first point >= h
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return this.hosts[this.owners[lo === n ? 0 : lo]!];
  }
}

/** A table's hosts per actor type. */
export type TypeHosts = Readonly<Record<string, readonly RingHost[]>>;

/** One ring per actor type; `lookup` answers an actor's owner. */
export class PlacementRings {
  private readonly rings = new Map<string, HashRing>();

  constructor(entries: TypeHosts, replicationFactor = DEFAULT_REPLICATION_FACTOR) {
    for (const [type, hosts] of Object.entries(entries)) if (hosts.length > 0) this.rings.set(type, new HashRing(hosts, replicationFactor));
  }

  /** The host of this actor; undefined when no host serves its type. */
  lookup(actorType: string, actorId: string): RingHost | undefined {
    return this.rings.get(actorType)?.get(actorId);
  }

  types(): string[] {
    return [...this.rings.keys()];
  }
}
