/**
 * Group commit: items marked dirty while a write is in flight are written together, by the next
 * write, so the per-change cost is one shared transaction. Up to MAX_WRITES writes run at once,
 * on disjoint items, so a store with network round trips keeps several transactions busy; one
 * item is never in two writes at a time.
 */

export const MAX_WRITES = 4;

export class GroupCommit<T> {
  private readonly write: (batch: T[]) => Promise<void>;
  private readonly failed: (batch: T[], e: unknown) => void;
  private readonly more: () => boolean;
  private readonly dirty = new Set<T>();
  private readonly writing = new Set<T>();
  private writes = 0;
  private scheduled = false;
  private idle: (() => void)[] = [];

  /**
   * `write` writes a batch; `failed` is told when it throws. `more` says whether something besides
   * the dirty items waits to be written (it is written with the next batch).
   */
  constructor(write: (batch: T[]) => Promise<void>, failed: (batch: T[], e: unknown) => void, more: () => boolean = () => false) {
    this.write = write;
    this.failed = failed;
    this.more = more;
  }

  /** The item has something to write: it goes with the next write. */
  mark(item: T): void {
    this.dirty.add(item);
    this.schedule();
  }

  /** Resolves once nothing waits to be written. */
  async drain(): Promise<void> {
    if (this.writes === 0 && this.dirty.size === 0) return;
    await new Promise<void>((r) => this.idle.push(r));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate: gather what the current I/O turn produced into one transaction
    setImmediate(() => {
      this.scheduled = false;
      this.kick();
    });
  }

  /** Starts a write of everything dirty that is not being written already. */
  private kick(): void {
    while (this.writes < MAX_WRITES && this.dirty.size > 0) {
      const batch = [...this.dirty].filter((c) => !this.writing.has(c));
      if (batch.length === 0) break;
      for (const c of batch) {
        this.dirty.delete(c);
        this.writing.add(c);
      }
      this.writes++;
      void this.write(batch)
        .catch((e) => this.failed(batch, e))
        .finally(() => {
          for (const c of batch) this.writing.delete(c);
          this.writes--;
          if (this.dirty.size > 0 || this.more()) this.schedule();
          else if (this.writes === 0) for (const r of this.idle.splice(0)) r();
        });
    }
  }
}
