/**
 * The catalog of instances, for listing and querying (the store itself cannot list keys).
 *
 * Each replica appends the ids of the instances it creates as one small key per group commit
 * (`<prefix>catalog||<replica>||<n>`), with the next chunk number under `…||head`, in the same
 * transaction as the records. Nothing is rewritten and purge does not touch it: a listing
 * reads every chunk of every replica named in `<prefix>catalogs` and keeps the ids whose record
 * still exists. Instances created before the catalog existed are not listed.
 */
import type { Logger } from 'pino';
import { EtagInvalidError } from '../components/state/errors.ts';
import type { StateStore, StateTransactionOperation } from '../components/types.ts';
import { isConflict } from './etag-retry.ts';

const enc = (v: unknown) => Buffer.from(JSON.stringify(v));
const REGISTER_ATTEMPTS = 20;

export class Catalog {
  private readonly store: StateStore;
  private readonly prefix: string;
  private readonly replicaId: string;
  private readonly log: Logger;
  private head = 0;
  private pending: string[] = [];

  constructor(store: StateStore, prefix: string, replicaId: string, log: Logger) {
    this.store = store;
    this.prefix = prefix;
    this.replicaId = replicaId;
    this.log = log;
  }

  private chunkKey(n: number, replica = this.replicaId): string {
    return `${this.prefix}catalog||${replica}||${n}`;
  }

  private headKey(replica = this.replicaId): string {
    return `${this.prefix}catalog||${replica}||head`;
  }

  private get replicasKey(): string {
    return `${this.prefix}catalogs`;
  }

  /** Reads where this replica's catalog ends and names the replica among those with one. */
  async init(): Promise<void> {
    this.head = await this.readHead(this.replicaId);
    for (let attempt = 0; attempt < REGISTER_ATTEMPTS; attempt++) {
      const item = await this.store.get(this.replicasKey);
      const names = item ? parseStrings(item.value) : [];
      if (names.includes(this.replicaId)) return;
      try {
        await this.store.set({
          key: this.replicasKey,
          value: enc([...names, this.replicaId]),
          ...(item ? { etag: item.etag } : { options: { concurrency: 'first-write' } }),
        });
        return;
      } catch (e) {
        if (!isConflict(e) && !(e instanceof EtagInvalidError)) throw e;
        // another replica registered at the same moment: read again
      }
    }
    this.log.warn('could not register this replica in the workflow catalog; its instances may be missing from listings');
  }

  /** An instance was created by a write being planned. */
  created(id: string): void {
    this.pending.push(id);
  }

  /** The operations that append what was created since the last call; undo() puts it back. */
  takeOps(): { ops: StateTransactionOperation[]; undo: () => void } | undefined {
    if (this.pending.length === 0) return undefined;
    const ids = this.pending;
    const n = this.head;
    this.pending = [];
    this.head = n + 1;
    return {
      ops: [
        { operation: 'upsert', request: { key: this.chunkKey(n), value: enc(ids) } },
        { operation: 'upsert', request: { key: this.headKey(), value: enc(n + 1) } },
      ],
      undo: () => {
        // the failed write was the last one: nothing was taken after it (one index write at a time)
        this.head = n;
        this.pending = [...ids, ...this.pending];
      },
    };
  }

  /** Every id ever catalogued by any replica (purged ones included), sorted, without repeats. */
  async allIds(): Promise<string[]> {
    const item = await this.store.get(this.replicasKey);
    const replicas = item ? parseStrings(item.value) : [this.replicaId];
    const ids = new Set<string>(this.pending);
    for (const r of replicas) {
      const head = r === this.replicaId ? this.head : await this.readHead(r);
      const keys = Array.from({ length: head }, (_, n) => this.chunkKey(n, r));
      for (let i = 0; i < keys.length; i += 500) {
        for (const chunk of await this.store.bulkGet(keys.slice(i, i + 500))) if (chunk) for (const id of parseStrings(chunk.value)) ids.add(id);
      }
    }
    return [...ids].sort();
  }

  private async readHead(replica: string): Promise<number> {
    const item = await this.store.get(this.headKey(replica));
    if (!item) return 0;
    const n = Number(JSON.parse(Buffer.from(item.value).toString('utf8')));
    return Number.isInteger(n) && n >= 0 ? n : 0;
  }
}

function parseStrings(value: Uint8Array): string[] {
  try {
    const v: unknown = JSON.parse(Buffer.from(value).toString('utf8'));
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}
