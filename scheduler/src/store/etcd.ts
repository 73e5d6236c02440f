/**
 * The HA job store: jobs in etcd, shared by several scheduler replicas.
 *
 * Jobs are spread over a fixed number of partitions (hash of the job key). Each replica keeps
 * a lease-bound member key; partition p belongs to member number p mod n of the sorted member
 * list, and the owning replica holds `<prefix>/owners/<p>` bound to its lease. When a replica
 * dies its lease expires, its owner keys vanish, and the others claim its partitions, load
 * their jobs and fire what is due (missed fires are caught up) — within the lease TTL.
 * On a planned handover the old owner stops firing, waits for triggers in flight and writes
 * their progress before it lets go, so nothing fires twice when all is well.
 */
import type { Etcd3, Lease, Watcher } from 'etcd3';
import type { Logger } from 'pino';
import { keyString, type JobKey, type JobOwnerRef, type JobRecord, type JobSpec } from '../types.ts';
import { unloadable } from '../validate.ts';
import type { JobStore, ProgressUpdate, StoreListener } from './types.ts';

export interface EtcdStoreOptions {
  endpoints: string[];
  /** Key prefix; several scheduler clusters can share one etcd with different prefixes. */
  prefix?: string;
  partitions?: number;
  /** Lease TTL in seconds: how long a dead replica's jobs wait before others take them. */
  leaseTtlSec?: number;
  replicaId: string;
  log: Logger;
  /**
   * TLS toward etcd: the CA that signed etcd's certificate, and a client certificate and key
   * when etcd requires them (--client-cert-auth). `https://` endpoints without it use the
   * system's CAs.
   */
  tls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
}

interface Stored {
  spec: JobSpec;
  createdAt: number;
  gen: string;
  count: number;
  nextAt: number | null;
  expiresAt?: number;
  requestId?: string;
}

interface Known {
  gen: string;
  /** etcd mod revision of the last version this replica knows; progress writes compare on it. */
  modRev: string;
}

const PAGE = 500;

export class EtcdJobStore implements JobStore {
  private readonly opts: Required<Omit<EtcdStoreOptions, 'log' | 'tls'>>;
  private readonly tls?: EtcdStoreOptions['tls'];
  private readonly log: Logger;
  private client!: Etcd3;
  private lease?: Lease;
  private listener!: StoreListener;
  private readonly owned = new Set<number>();
  private readonly known = new Map<string, Known>();
  /** Highest revision seen per job key (puts and deletes), so a late range read cannot resurrect a deleted job. */
  private readonly seenRev = new Map<string, bigint>();
  /** The immutable part of each owned job (progress rewrites the whole value from it). */
  private readonly bodies = new Map<string, Omit<Stored, 'count' | 'nextAt'>>();
  private watchers: Watcher[] = [];
  private timer?: NodeJS.Timeout;
  private rebalancing?: Promise<void>;
  private again = false;
  private closed = false;

  constructor(opts: EtcdStoreOptions) {
    this.log = opts.log;
    this.tls = opts.tls;
    this.opts = {
      endpoints: opts.endpoints,
      prefix: (opts.prefix ?? '/rt/scheduler').replace(/\/+$/, ''),
      partitions: opts.partitions ?? 16,
      leaseTtlSec: opts.leaseTtlSec ?? 5,
      replicaId: opts.replicaId,
    };
  }

  private get p(): string {
    return this.opts.prefix;
  }

  private jobKey(k: JobKey): string {
    return `${this.p}/jobs/${[k.namespace, k.appId, k.owner, k.name].map(encodeURIComponent).join('/')}`;
  }

  private parseJobKey(etcdKey: string): JobKey | undefined {
    const rest = etcdKey.slice(`${this.p}/jobs/`.length).split('/');
    if (rest.length !== 4) return undefined;
    const [namespace, appId, owner, name] = rest.map(decodeURIComponent);
    return { namespace, appId, owner, name };
  }

  partitionOf(k: JobKey): number {
    // FNV-1a: stable across processes and versions
    let h = 0x811c9dc5;
    const s = keyString(k);
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h % this.opts.partitions;
  }

  ownedPartitions(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  async start(listener: StoreListener): Promise<void> {
    this.listener = listener;
    const { Etcd3 } = await import('etcd3');
    const credentials = this.tls ? { rootCertificate: this.tls.ca, certChain: this.tls.cert, privateKey: this.tls.key } : undefined;
    this.client = new Etcd3({ hosts: this.opts.endpoints, dialTimeout: 3000, ...(credentials ? { credentials } : {}) });
    // fail fast (and let the process manager restart us) instead of waiting on a dead etcd
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.client.get(`${this.p}/members/`).exists(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`etcd at ${this.opts.endpoints.join(', ')} did not answer within 10 s`)), 10_000);
        }),
      ]);
    } catch (e) {
      this.client.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
    const jobs = await this.client.watch().prefix(`${this.p}/jobs/`).create();
    jobs.on('put', (kv) => this.onJobEvent(kv.key.toString(), kv.mod_revision, kv.value.toString()));
    jobs.on('delete', (kv) => this.onJobEvent(kv.key.toString(), kv.mod_revision, undefined));
    const membership = await this.client.watch().prefix(`${this.p}/members/`).create();
    const owners = await this.client.watch().prefix(`${this.p}/owners/`).create();
    for (const w of [membership, owners]) {
      w.on('put', () => this.rebalanceSoon());
      w.on('delete', () => this.rebalanceSoon());
    }
    this.watchers = [jobs, membership, owners];
    await this.join();
    this.timer = setInterval(() => this.rebalanceSoon(), 1000);
    this.timer.unref();
    await this.rebalance();
  }

  /** A lease and a member key; on lease loss, stop firing everything and join again. */
  private async join(): Promise<void> {
    const lease = this.client.lease(this.opts.leaseTtlSec);
    this.lease = lease;
    lease.on('lost', (err) => {
      if (this.closed || this.lease !== lease) return;
      this.log.warn({ err: err?.message }, 'etcd lease lost: giving up all partitions and joining again');
      this.lease = undefined;
      const all = [...this.owned];
      this.owned.clear();
      void this.listener.release((k) => all.includes(this.partitionOf(k))).then(() => this.rejoin());
    });
    await lease.put(`${this.p}/members/${this.opts.replicaId}`).value(this.opts.replicaId).exec();
  }

  /** Joins again after a lost lease, retrying while etcd is unreachable. */
  private async rejoin(): Promise<void> {
    while (!this.closed) {
      try {
        await this.join();
        this.rebalanceSoon();
        return;
      } catch (e) {
        this.log.warn({ err: (e as Error).message }, 'could not rejoin the scheduler cluster; retrying in 1 s');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private rebalanceSoon(): void {
    if (this.closed) return;
    if (this.rebalancing) {
      this.again = true;
      return;
    }
    this.rebalancing = this.rebalance()
      .catch((e) => this.log.warn({ err: (e as Error).message }, 'partition rebalance failed; retrying'))
      .finally(() => {
        this.rebalancing = undefined;
        if (this.again) {
          this.again = false;
          this.rebalanceSoon();
        }
      });
  }

  private async rebalance(): Promise<void> {
    const lease = this.lease;
    if (!lease || this.closed) return;
    const me = this.opts.replicaId;
    const members = (await this.client.getAll().prefix(`${this.p}/members/`).keys()).map((k) => k.slice(`${this.p}/members/`.length)).sort();
    const ownerMap = new Map<number, string>();
    for (const [k, v] of Object.entries(await this.client.getAll().prefix(`${this.p}/owners/`).strings())) ownerMap.set(Number(k.slice(`${this.p}/owners/`.length)), v);
    if (!members.includes(me)) return; // our member key is not visible yet (or lost)
    const desired = (p: number) => members[p % members.length] === me;

    // let go of partitions another live member should have
    const toRelease = [...this.owned].filter((p) => !desired(p));
    if (toRelease.length > 0) {
      for (const p of toRelease) this.owned.delete(p);
      await this.listener.release((k) => toRelease.includes(this.partitionOf(k)));
      for (const p of toRelease) {
        await this.client.if(`${this.p}/owners/${p}`, 'Value', '==', me).then(this.client.delete().key(`${this.p}/owners/${p}`)).commit();
        this.forgetPartition(p);
      }
      this.log.info({ partitions: toRelease }, 'released partitions');
    }

    // claim free partitions that are ours (or ours from a previous lease of this replica id)
    const claimed: number[] = [];
    const leaseId = await lease.grant();
    for (let p = 0; p < this.opts.partitions; p++) {
      if (!desired(p) || this.owned.has(p)) continue;
      const holder = ownerMap.get(p);
      if (holder !== undefined && holder !== me) continue;
      const key = `${this.p}/owners/${p}`;
      const cmp = holder === me ? this.client.if(key, 'Value', '==', me) : this.client.if(key, 'Create', '==', 0);
      const res = await cmp.then(this.client.put(key).value(me).lease(leaseId)).commit();
      if (res.succeeded) claimed.push(p);
    }
    if (claimed.length > 0) {
      for (const p of claimed) this.owned.add(p);
      const n = await this.load(new Set(claimed));
      this.log.info({ partitions: claimed, jobs: n }, 'claimed partitions');
    }
  }

  /** Reads every job of the given partitions into the listener. */
  private async load(parts: Set<number>): Promise<number> {
    let n = 0;
    await this.scan(`${this.p}/jobs/`, (key, kv) => {
      if (parts.has(this.partitionOf(key)) && this.apply(key, kv.mod_revision, kv.value.toString())) n++;
    });
    return n;
  }

  /** Visits every job under a key prefix, a page at a time (responses stay small). */
  private async scan(prefix: string, visit: (key: JobKey, kv: { mod_revision: string; value: Buffer }) => void): Promise<void> {
    let start = prefix;
    const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    for (;;) {
      const res = await this.client.getAll().inRange({ start, end }).limit(PAGE).exec();
      for (const kv of res.kvs) {
        const key = this.parseJobKey(kv.key.toString());
        if (key) visit(key, kv);
      }
      if (!res.more || res.kvs.length === 0) break;
      start = `${res.kvs[res.kvs.length - 1].key.toString()}\u0000`;
    }
  }

  private onJobEvent(etcdKey: string, modRev: string, value: string | undefined): void {
    const key = this.parseJobKey(etcdKey);
    if (!key || !this.owned.has(this.partitionOf(key))) return;
    this.apply(key, modRev, value);
  }

  /** Applies one version of a job if it is newer than what was seen; returns whether it is live. */
  private apply(key: JobKey, modRev: string, value: string | undefined): boolean {
    const ks = keyString(key);
    const rev = BigInt(modRev);
    if (rev <= (this.seenRev.get(ks) ?? -1n)) return false;
    this.seenRev.set(ks, rev);
    if (value === undefined) {
      this.known.delete(ks);
      this.bodies.delete(ks);
      this.listener.remove(key);
      return false;
    }
    const rec = this.readable(key, value);
    if (!rec) {
      this.known.delete(ks);
      this.bodies.delete(ks);
      this.listener.remove(key);
      return false;
    }
    const s: Stored = rec;
    this.bodies.set(ks, { spec: s.spec, createdAt: s.createdAt, gen: s.gen, expiresAt: s.expiresAt, requestId: s.requestId });
    const k = this.known.get(ks);
    if (k && k.gen === s.gen) {
      // our own progress write coming back: only the revision moves
      k.modRev = modRev;
      return true;
    }
    this.known.set(ks, { gen: s.gen, modRev });
    this.listener.upsert(rec);
    return true;
  }

  /**
   * A stored value as a record, or undefined for one that cannot run (corrupt, or out of
   * bounds): that job is logged and skipped, never fatal to the others. It stays in etcd
   * for a human to look at; a new write of the same name replaces it.
   */
  private readable(key: JobKey, value: string): JobRecord | undefined {
    let rec: JobRecord | undefined;
    let reason: string | undefined;
    try {
      rec = decode(key, value);
      reason = unloadable(rec);
    } catch (e) {
      reason = (e as Error).message;
    }
    if (reason === undefined) return rec;
    this.log.error({ job: key, reason }, `stored job "${key.name}" cannot be loaded; it is skipped (quarantined), the other jobs run`);
    return undefined;
  }

  private forgetPartition(p: number): void {
    for (const ks of [...this.known.keys()]) {
      const [namespace, appId, owner, name] = ks.split('\u0000');
      if (this.partitionOf({ namespace, appId, owner, name }) === p) {
        this.known.delete(ks);
        this.seenRev.delete(ks);
        this.bodies.delete(ks);
      }
    }
  }

  async create(rec: JobRecord): Promise<boolean> {
    const key = this.jobKey(rec.key);
    const res = await this.client.if(key, 'Create', '==', 0).then(this.client.put(key).value(encode(rec))).commit();
    return res.succeeded === true;
  }

  async put(rec: JobRecord): Promise<void> {
    await this.client.put(this.jobKey(rec.key)).value(encode(rec)).exec();
  }

  async get(key: JobKey): Promise<JobRecord | undefined> {
    const v = await this.client.get(this.jobKey(key)).string();
    return v === null ? undefined : this.readable(key, v);
  }

  async delete(key: JobKey): Promise<void> {
    await this.client.delete().key(this.jobKey(key)).exec();
  }

  async list(ref: JobOwnerRef): Promise<JobRecord[]> {
    const out: JobRecord[] = [];
    await this.scan(`${this.p}/jobs/${[ref.namespace, ref.appId, ref.owner].map(encodeURIComponent).join('/')}/`, (key, kv) => {
      const rec = this.readable(key, kv.value.toString());
      if (rec) out.push(rec);
    });
    return out.sort((a, b) => (a.key.name < b.key.name ? -1 : a.key.name > b.key.name ? 1 : 0));
  }

  async saveProgress(updates: ProgressUpdate[]): Promise<void> {
    // one small transaction per job, compared on the revision we know: a job replaced or
    // deleted meanwhile is left alone
    const queue = [...updates];
    const worker = async () => {
      for (let u = queue.shift(); u; u = queue.shift()) {
        const ks = keyString(u.key);
        const k = this.known.get(ks);
        if (!k || k.gen !== u.gen) continue;
        const key = this.jobKey(u.key);
        const cmp = this.client.if(key, 'Mod', '==', k.modRev);
        const res =
          u.nextAt === null
            ? await cmp.then(this.client.delete().key(key)).commit()
            : await cmp.then(this.client.put(key).value(JSON.stringify({ ...(await this.current(u, k)), count: u.count, nextAt: u.nextAt }))).commit();
        if (res.succeeded && u.nextAt !== null) {
          const rev = BigInt(res.header.revision);
          if (rev > BigInt(k.modRev)) k.modRev = res.header.revision;
          if (rev > (this.seenRev.get(ks) ?? -1n)) this.seenRev.set(ks, rev);
        }
        if (res.succeeded && u.nextAt === null) {
          this.known.delete(ks);
          this.bodies.delete(ks);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(32, queue.length) }, worker));
  }

  private async current(u: ProgressUpdate, k: Known): Promise<Omit<Stored, 'count' | 'nextAt'>> {
    const ks = keyString(u.key);
    const hit = this.bodies.get(ks);
    if (hit && hit.gen === k.gen) return hit;
    const v = await this.client.get(this.jobKey(u.key)).string();
    const s = v ? (JSON.parse(v) as Stored) : undefined;
    const body = { spec: s?.spec ?? {}, createdAt: s?.createdAt ?? 0, gen: k.gen, expiresAt: s?.expiresAt, requestId: s?.requestId };
    this.bodies.set(ks, body);
    return body;
  }

  describe(): string {
    return `etcd:${this.opts.endpoints.join(',')}${this.p} (replica ${this.opts.replicaId})`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // hand everything over cleanly: stop firing, wait for triggers in flight, then let go
    const all = [...this.owned];
    await this.listener?.release((k) => all.includes(this.partitionOf(k))).catch(() => undefined);
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.rebalancing?.catch(() => undefined);
    this.owned.clear();
    for (const w of this.watchers) await w.cancel().catch(() => undefined);
    const lease = this.lease;
    this.lease = undefined;
    await lease?.revoke().catch(() => undefined);
    this.client?.close();
  }
}

function encode(r: JobRecord): string {
  const s: Stored = { spec: r.spec, createdAt: r.createdAt, gen: r.gen, count: r.count, nextAt: r.nextAt, expiresAt: r.expiresAt, requestId: r.requestId };
  return JSON.stringify(s);
}

function decode(key: JobKey, v: string): JobRecord {
  const s = JSON.parse(v) as Stored;
  const rec: JobRecord = { key, spec: s.spec, createdAt: s.createdAt, gen: s.gen, count: s.count, nextAt: s.nextAt, expiresAt: s.expiresAt };
  if (s.requestId) rec.requestId = s.requestId;
  return rec;
}
