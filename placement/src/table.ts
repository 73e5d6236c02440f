/**
 * The members the placement service knows: each host that reports, with the actor types it
 * serves and when it was last heard from. A host silent for longer than the heartbeat timeout
 * is removed. Tables are per namespace, as the reference runtime groups them: a host's table
 * lists the hosts of its own namespace only.
 */
import type { RingHost } from './hashing.ts';

/** What a host says about itself in each heartbeat (checked: placement/src/grpc/validate.ts). */
export interface HostReport {
  name: string;
  id: string;
  namespace: string;
  pod: string;
  /** Sorted, no duplicates. */
  entities: string[];
}

interface Member extends HostReport {
  lastSeen: number;
}

/** A table: actor type → its hosts (sorted by name). */
export type TableEntries = Record<string, RingHost[]>;

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

export class MemberTable {
  private readonly members = new Map<string, Member>();

  get size(): number {
    return this.members.size;
  }

  has(name: string): boolean {
    return this.members.has(name);
  }

  /** Records a heartbeat; true when the tables change (a new host, or other types or app id). */
  upsert(h: HostReport, now: number): boolean {
    const m = this.members.get(h.name);
    if (m && m.id === h.id && m.namespace === h.namespace && m.pod === h.pod && sameList(m.entities, h.entities)) {
      m.lastSeen = now;
      return false;
    }
    this.members.set(h.name, { ...h, entities: [...h.entities], lastSeen: now });
    return true;
  }

  /** True when it was a member. */
  remove(name: string): boolean {
    return this.members.delete(name);
  }

  /** Names of the members not heard from for longer than `timeoutMs` (not removed here). */
  silent(now: number, timeoutMs: number): string[] {
    const out: string[] = [];
    for (const m of this.members.values()) if (now - m.lastSeen > timeoutMs) out.push(m.name);
    return out;
  }

  /** The table of one namespace: each actor type with the hosts that serve it. */
  entries(namespace: string): TableEntries {
    const out: TableEntries = {};
    const sorted = [...this.members.values()].filter((m) => m.namespace === namespace).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const m of sorted) {
      for (const type of m.entities) (out[type] ??= []).push({ name: m.name, id: m.id, pod: m.pod });
    }
    return out;
  }

  clear(): void {
    this.members.clear();
  }
}
