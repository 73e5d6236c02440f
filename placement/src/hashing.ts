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

/** Each host's points, kept across tables: an update hashes only the hosts that are new. */
const pointCache = new Map<string, Uint32Array>();
const POINT_CACHE_MAX = 10_000;

function hostPoints(name: string, replicationFactor: number): Uint32Array {
  const key = `${replicationFactor}|${name}`;
  let points = pointCache.get(key);
  if (!points) {
    points = new Uint32Array(replicationFactor);
    for (let v = 0; v < replicationFactor; v++) points[v] = hash32(`${name}#${v}`);
    if (pointCache.size >= POINT_CACHE_MAX) pointCache.delete(pointCache.keys().next().value!);
    pointCache.set(key, points);
  }
  return points;
}

export class HashRing {
  readonly hosts: readonly RingHost[];
  /** Ring points, ascending. */
  private readonly points: Uint32Array;
  /** owners[i]: index in `hosts` of the host at points[i]. */
  private readonly owners: Uint16Array;

  /** `hosts` in any order (the ring depends only on the set); names must be unique. */
  constructor(hosts: readonly RingHost[], replicationFactor = DEFAULT_REPLICATION_FACTOR) {
    if (!Number.isInteger(replicationFactor) || replicationFactor < 1) throw new RangeError(`replication factor must be a whole number >= 1, got ${replicationFactor}`);
    this.hosts = [...hosts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    if (this.hosts.length > 0xffff) throw new RangeError(`a ring holds at most 65,535 hosts, got ${this.hosts.length}`);
    const n = this.hosts.length * replicationFactor;
    // (point, host index) as one number, point × 2^16 + index (< 2^48, exact in a double), so a
    // plain numeric sort orders by point and breaks ties by host name: every host agrees
    const keyed = new Float64Array(n);
    for (let h = 0; h < this.hosts.length; h++) {
      const points = hostPoints(this.hosts[h]!.name, replicationFactor);
      for (let v = 0; v < replicationFactor; v++) keyed[h * replicationFactor + v] = points[v]! * 65536 + h;
    }
    keyed.sort();
    this.points = new Uint32Array(n);
    this.owners = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      const k = keyed[i]!;
      const h = k % 65536;
      this.points[i] = (k - h) / 65536;
      this.owners[i] = h;
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
