/**
 * Callers waiting for an instance to reach a state (WaitForInstanceStart/Completion, the HTTP
 * API's waits): answered after each write that may concern them, and, with a store other
 * replicas write too, by polling it.
 */
import type { Clock, Timer } from '../../../shared/clock.ts';
import type { Draft, InstanceTable } from './instances.ts';
import type { InstanceState } from './record.ts';

type Until = (r: InstanceState | undefined) => boolean;
type Waiter = { until: Until; resolve: (r: InstanceState | undefined) => void };

/** How often waiters read a shared store (another replica may finish the instance). */
const POLL_MS = 1000;

export class Waiters {
  private readonly table: InstanceTable;
  private readonly byId = new Map<string, Set<Waiter>>();
  private readonly poll?: Timer;

  constructor(table: InstanceTable, clock: Clock) {
    this.table = table;
    if (table.shared) this.poll = clock.every(POLL_MS, () => void this.readAll());
  }

  /** Resolves with the state once `until` holds (or undefined when aborted or closed). */
  wait(id: string, until: Until, signal?: AbortSignal): Promise<InstanceState | undefined> {
    return new Promise((resolve) => {
      let set = this.byId.get(id);
      if (!set) this.byId.set(id, (set = new Set()));
      const mine = set;
      const w: Waiter = {
        until,
        resolve: (r) => {
          if (!mine.delete(w)) return;
          if (mine.size === 0 && this.byId.get(id) === mine) this.byId.delete(id);
          resolve(r);
        },
      };
      set.add(w);
      signal?.addEventListener('abort', () => w.resolve(undefined), { once: true });
      // registered first, read second: a change committed in between is not missed
      this.table.read(id).then(
        (r) => {
          if (until(r)) w.resolve(r);
        },
        () => w.resolve(undefined),
      );
    });
  }

  /** Once the write succeeded, answers the instance's waiters with the state it wrote. */
  notifyAfter(d: Draft, id: string): void {
    d.effects.push(() => this.answer(id, d.rec));
  }

  close(): void {
    this.poll?.cancel();
    for (const set of this.byId.values()) for (const w of [...set]) w.resolve(undefined);
    this.byId.clear();
  }

  private answer(id: string, rec: InstanceState | undefined): void {
    const set = this.byId.get(id);
    if (set) for (const w of [...set]) if (w.until(rec)) w.resolve(rec);
  }

  private async readAll(): Promise<void> {
    for (const id of [...this.byId.keys()]) this.answer(id, await this.table.read(id, true).catch(() => undefined));
  }
}
