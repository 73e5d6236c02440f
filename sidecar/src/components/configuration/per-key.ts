/**
 * Work per key, one task at a time in the order given; different keys run side by side. The
 * configuration stores deliver a key's changes through it, so that a subscriber sees them in
 * order per key while a slow key does not hold up the others.
 */
export class PerKeySerial {
  private readonly tails = new Map<string, Promise<void>>();

  /** Queues `task` after the key's earlier ones. A task's failure is its own to report. */
  run(key: string, task: () => Promise<void>): void {
    const next = (this.tails.get(key) ?? Promise.resolve()).then(task).catch(() => undefined);
    this.tails.set(key, next);
    void next.then(() => {
      if (this.tails.get(key) === next) this.tails.delete(key);
    });
  }

  /** Settles once every queued task has. */
  async idle(): Promise<void> {
    while (this.tails.size) await Promise.all(this.tails.values());
  }
}
