/**
 * The per-replica index of active instances: what a replica works on, in INDEX_SHARDS keys
 * (`index||<replica>||<shard>`), read at start to resume them and by a live replica to adopt a
 * dead one's. An instance joins the index of the replica that writes it and leaves when it
 * finishes or is purged. Only this replica's own index is kept in memory; a changed shard is
 * written whole, by one write at a time (so an older list never lands last).
 */
import type { Logger } from 'pino';
import type { StateStore, StateTransactionOperation } from '../components/types.ts';
import { decode, encode, type Keys } from './keys.ts';

export const INDEX_SHARDS = 32;

export class ActiveIndex {
  private readonly store: StateStore;
  private readonly keys: Keys;
  private readonly me: string;
  private readonly log: Logger;
  private readonly shards: Set<string>[] = Array.from({ length: INDEX_SHARDS }, () => new Set<string>());
  private readonly changed = new Set<number>();

  constructor(store: StateStore, keys: Keys, replicaId: string, log: Logger) {
    this.store = store;
    this.keys = keys;
    this.me = replicaId;
    this.log = log;
  }

  /** The instances a replica was working on (this one's are kept in memory too). */
  async load(replica = this.me): Promise<string[]> {
    const items = await this.store.bulkGet(this.shards.map((_, i) => this.keys.index(replica, i)));
    const ids: string[] = [];
    items.forEach((it, i) => {
      if (!it) return;
      try {
        const list = decode<unknown>(it.value);
        if (Array.isArray(list)) for (const id of list) if (typeof id === 'string') {
          if (replica === this.me) this.shards[i].add(id);
          ids.push(id);
        }
      } catch {
        this.log.warn({ key: this.keys.index(replica, i) }, 'workflow index shard is not JSON; ignoring it');
      }
    });
    return ids;
  }

  /** Deletes another replica's index (after adopting its instances). */
  async drop(replica: string): Promise<void> {
    if (replica === this.me) return;
    await this.store.bulkDelete(this.shards.map((_, i) => ({ key: this.keys.index(replica, i) })));
  }

  get count(): number {
    let n = 0;
    for (const s of this.shards) n += s.size;
    return n;
  }

  /** Adds an instance to this replica's index, or removes it. */
  mark(id: string, active: boolean): void {
    const shard = shardOf(id);
    const set = this.shards[shard];
    if (active && !set.has(id)) {
      set.add(id);
      this.changed.add(shard);
    } else if (!active && set.delete(id)) this.changed.add(shard);
  }

  get hasChanges(): boolean {
    return this.changed.size > 0;
  }

  /** The writes of the shards changed since the last call; `undo` marks them changed again. */
  takeOps(): { ops: StateTransactionOperation[]; undo: () => void } {
    const shards = [...this.changed];
    this.changed.clear();
    return {
      ops: shards.map((n) => ({ operation: 'upsert', request: { key: this.keys.index(this.me, n), value: encode([...this.shards[n]]) } })),
      undo: () => {
        for (const n of shards) this.changed.add(n);
      },
    };
  }
}

function shardOf(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) | 0;
  return Math.abs(h) % INDEX_SHARDS;
}
