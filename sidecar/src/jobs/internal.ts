/**
 * Internal jobs: how other building blocks (workflow timers, activity retries) use the
 * scheduler for durable reminders. Names live in a namespace of their own (`owner`) so they
 * never collide with the app's jobs, and triggers go to the owner's handler instead of the app.
 *
 * The jobs building block provides it as the `internalJobs` service (jobs/block.ts) when a
 * scheduler is configured; the workflows block uses it from `ctx.services.internalJobs`.
 */
import type { FailurePolicy } from '../../../scheduler/src/index.ts';

export interface InternalJobTrigger {
  owner: string;
  name: string;
  data: unknown;
  /** When it was due (ms since epoch). */
  dueAt: number;
}

/** When a repeating internal job fires (ms since epoch). */
export interface RepeatingJob {
  dueAt: number;
  everyMs?: number;
  repeats?: number;
  expiresAt?: number;
  /** What a failed fire gets; absent = the scheduler's default (constant 1 s, 3 retries). */
  failurePolicy?: FailurePolicy;
}

export interface InternalJobs {
  /** Schedules (or replaces) a one-shot reminder. dueAt in ms since epoch. */
  scheduleOnce(owner: string, name: string, dueAt: number, data: unknown): Promise<void>;
  /**
   * Schedules a reminder that fires at dueAt and then every everyMs (at most `repeats` times in
   * all, never at or after expiresAt); failed fires follow spec.failurePolicy. One of that name
   * is replaced, unless `overwrite` is false: then the scheduler's `exists` error. Actor
   * reminders use it.
   */
  schedule(owner: string, name: string, spec: RepeatingJob, data: unknown, overwrite?: boolean): Promise<void>;
  /** The data a reminder was scheduled with, or undefined when there is none of that name. */
  get(owner: string, name: string): Promise<{ data: unknown } | undefined>;
  /** Every job of the owner, with its data. */
  list(owner: string): Promise<{ name: string; data: unknown }[]>;
  delete(owner: string, name: string): Promise<void>;
  /**
   * Handles triggers of one owner. The handler's promise resolving = done; rejecting = failed,
   * retried by the scheduler (constant 1 s).
   */
  onTrigger(owner: string, handler: (t: InternalJobTrigger) => Promise<void>): void;
}
