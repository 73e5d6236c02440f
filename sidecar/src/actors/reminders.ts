/**
 * Actor reminders: durable jobs in rt's scheduler, as the reference runtime keeps them since it
 * moved reminders to its scheduler. One internal job per reminder, owner `actorreminder`, named
 * `<type>||<id>||<name>` (the scheduler's key adds namespace and app id), so a restart of the
 * sidecar or the scheduler loses none. The job's data holds the reminder as registered (its
 * texts, for GET) and the scheduler fires it on its own schedule (dueTime, `@every` period,
 * repeats, ttl); each fire goes to the app through the actor's turn, and a fire the app fails
 * is retried or dropped by the reminder's failure policy (the job's; absent = the scheduler's
 * default).
 */
import { ERRORS, fail } from '../api/errors.ts';
import type { InternalJobs, InternalJobTrigger } from '../jobs/internal.ts';
import type { ReminderOptions } from './reminder-request.ts';
import type { FireSchedule } from './schedule.ts';

export const REMINDER_OWNER = 'actorreminder';

/** A reminder as registered, and as kept in its job's data. */
export interface StoredReminder {
  actorType: string;
  actorId: string;
  name: string;
  dueTime: string;
  period: string;
  ttl: string;
  data: unknown;
}

export function reminderJobName(type: string, id: string, name: string): string {
  return `${type}||${id}||${name}`;
}

export class ActorReminders {
  private readonly jobs: InternalJobs;

  constructor(jobs: InternalJobs) {
    this.jobs = jobs;
  }

  /** With `overwrite` false, a reminder of the name that exists is the reference's ERR_ACTOR_REMINDER_ALREADY_EXISTS. */
  async create(r: StoredReminder, s: FireSchedule, opts: ReminderOptions = {}): Promise<void> {
    const spec = { dueAt: s.dueAt, everyMs: s.periodMs, repeats: s.repeats, expiresAt: s.expiresAt, failurePolicy: opts.failurePolicy };
    try {
      await this.jobs.schedule(REMINDER_OWNER, reminderJobName(r.actorType, r.actorId, r.name), spec, r, opts.overwrite ?? true);
    } catch (e) {
      if ((e as { kind?: string }).kind === 'exists') throw fail(ERRORS.ACTOR_REMINDER_EXISTS, `actor reminder already exists: ${r.name}`);
      throw e;
    }
  }

  async get(type: string, id: string, name: string): Promise<StoredReminder | undefined> {
    const job = await this.jobs.get(REMINDER_OWNER, reminderJobName(type, id, name));
    return job ? (job.data as StoredReminder) : undefined;
  }

  /** The reminders of a type, or of one actor of it. */
  async list(type: string, id?: string): Promise<StoredReminder[]> {
    const jobs = await this.jobs.list(REMINDER_OWNER);
    return jobs.map((j) => j.data as StoredReminder).filter((r) => r && r.actorType === type && (id === undefined || r.actorId === id));
  }

  async delete(type: string, id: string, name: string): Promise<void> {
    await this.jobs.delete(REMINDER_OWNER, reminderJobName(type, id, name));
  }

  /** Fires go to `fire`; its rejection is a failed fire, retried by the scheduler. */
  onFire(fire: (r: StoredReminder) => Promise<void>): void {
    this.jobs.onTrigger(REMINDER_OWNER, async (t: InternalJobTrigger) => {
      const r = t.data as StoredReminder | undefined;
      if (!r || typeof r !== 'object' || typeof r.actorType !== 'string') return; // not ours to fire: done
      await fire(r);
    });
  }
}
