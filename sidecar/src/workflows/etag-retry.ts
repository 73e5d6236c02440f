/**
 * Optimistic concurrency between replicas sharing a store: every write of a record carries its
 * etag (a new record: first-write). A write another writer got to first fails with the store's
 * EtagMismatchError; the instance is then read again and its mutations run again on the fresh
 * copy. One group commit writes many instances in one transaction; when that transaction fails,
 * they are written one by one, so that one instance's conflict does not hold back the others.
 */
import { EtagMismatchError } from '../components/state/errors.ts';
import type { StateTransactionOperation } from '../components/types.ts';

/** Another writer changed (or created) the item first: the write's etag condition failed. */
export function isConflict(e: unknown): boolean {
  return e instanceof EtagMismatchError;
}

export interface InstanceWrite {
  ops: StateTransactionOperation[];
}

export interface CommitOutcome<P> {
  /** The write of `p` is stored (or it had nothing to write). */
  stored(p: P): void;
  /** The write of `p` failed with `e` (a conflict, or the store failed). */
  failed(p: P, e: unknown): void;
}

/**
 * Writes the instances' operations and `shared` ones (index, catalog) in one transaction; when it
 * fails, `shared` alone (`sharedFailed` when that fails too) and then each instance alone.
 */
export async function commitWrites<P extends InstanceWrite>(
  write: (ops: StateTransactionOperation[]) => Promise<void>,
  writes: P[],
  shared: StateTransactionOperation[],
  outcome: CommitOutcome<P>,
  sharedFailed: (e: unknown) => void,
): Promise<void> {
  try {
    await write([...writes.flatMap((p) => p.ops), ...shared]);
    for (const p of writes) outcome.stored(p);
    return;
  } catch (e) {
    // a single instance's write: nothing to separate
    if (writes.filter((p) => p.ops.length > 0).length <= 1 && shared.length === 0) {
      for (const p of writes) {
        if (p.ops.length > 0) outcome.failed(p, e);
        else outcome.stored(p);
      }
      return;
    }
  }
  if (shared.length) await write(shared).catch(sharedFailed);
  for (const p of writes) {
    if (p.ops.length === 0) {
      outcome.stored(p);
      continue;
    }
    try {
      await write(p.ops);
      outcome.stored(p);
    } catch (e) {
      outcome.failed(p, e);
    }
  }
}
