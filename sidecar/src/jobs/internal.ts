/**
 * Internal jobs: how other building blocks (workflow timers, activity retries) use the
 * scheduler for durable reminders. Names live in a namespace of their own (`owner`) so they
 * never collide with the app's jobs, and triggers go to the owner's handler instead of the app.
 *
 * The jobs building block implements this and sets it on the context it owns; a workflow
 * engine asks for it with `getInternalJobs(ctx)`.
 */
export interface InternalJobTrigger {
  owner: string;
  name: string;
  data: unknown;
  /** When it was due (ms since epoch). */
  dueAt: number;
}

export interface InternalJobs {
  /** Schedules (or replaces) a one-shot reminder. dueAt in ms since epoch. */
  scheduleOnce(owner: string, name: string, dueAt: number, data: unknown): Promise<void>;
  delete(owner: string, name: string): Promise<void>;
  /**
   * Handles triggers of one owner. The handler's promise resolving = done; rejecting = failed,
   * retried by the scheduler (constant 1 s).
   */
  onTrigger(owner: string, handler: (t: InternalJobTrigger) => Promise<void>): void;
}

const registry = new WeakMap<object, InternalJobs>();

export function setInternalJobs(ctx: object, jobs: InternalJobs): void {
  registry.set(ctx, jobs);
}

export function getInternalJobs(ctx: object): InternalJobs | undefined {
  return registry.get(ctx);
}
