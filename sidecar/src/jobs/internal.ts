/**
 * Internal jobs: how other building blocks (workflow timers, activity retries) use the
 * scheduler for durable reminders. Names live in a namespace of their own (`owner`) so they
 * never collide with the app's jobs, and triggers go to the owner's handler instead of the app.
 *
 * The jobs building block provides it as the `internalJobs` service (jobs/block.ts) when a
 * scheduler is configured; the workflows block uses it from `ctx.services.internalJobs`.
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
