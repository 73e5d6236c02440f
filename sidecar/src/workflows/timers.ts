/**
 * Durable timers. With the scheduler's internal jobs (the normal case) a timer is a one-shot
 * job owned by `workflows`, so it survives a restart of the sidecar. Without them the timers
 * run in this process; they are still durable, because the instance record keeps every
 * pending timer and the engine arms them again when it starts.
 */
import type { Logger } from 'pino';
import type { InternalJobs } from '../jobs/internal.ts';
import { SYSTEM_CLOCK, type Clock, type Timer } from '../../../shared/clock.ts';

export const TIMER_OWNER = 'workflows';

export interface TimerRef {
  instanceId: string;
  executionId: string;
  /** Orchestrator timer id, or `start` for a delayed start. */
  timerId: string;
}

/** Delay before an in-process timer whose delivery failed fires again. */
export const REFIRE_MS = 1000;

export class Timers {
  private readonly jobs?: InternalJobs;
  private readonly local = new Map<string, Timer>();
  private readonly log: Logger;
  private readonly clock: Clock;
  private fire: (t: TimerRef) => Promise<void> = async () => undefined;

  /** `clock`: the time in-process timers run on (tests pass a ManualClock). */
  constructor(jobs: InternalJobs | undefined, log: Logger, clock: Clock = SYSTEM_CLOCK) {
    this.jobs = jobs;
    this.log = log;
    this.clock = clock;
    if (!jobs) log.info('workflow timers run in-process (no internal jobs available); pending timers are re-armed from stored state at start');
  }

  get durableInScheduler(): boolean {
    return this.jobs !== undefined;
  }

  onFire(fn: (t: TimerRef) => Promise<void>): void {
    this.fire = fn;
    this.jobs?.onTrigger(TIMER_OWNER, async (trig) => {
      const t = trig.data as TimerRef;
      if (!t || typeof t.instanceId !== 'string') return;
      await this.fire(t);
    });
  }

  async arm(t: TimerRef, fireAt: number): Promise<void> {
    if (this.jobs) {
      await this.jobs.scheduleOnce(TIMER_OWNER, jobName(t), fireAt, t);
      return;
    }
    this.armLocal(t, fireAt);
  }

  async cancel(t: TimerRef): Promise<void> {
    const key = jobName(t);
    this.local.get(key)?.cancel();
    this.local.delete(key);
    if (this.jobs) await this.jobs.delete(TIMER_OWNER, key).catch((e) => this.log.debug({ err: e }, 'deleting a workflow timer job failed'));
  }

  close(): void {
    for (const h of this.local.values()) h.cancel();
    this.local.clear();
  }

  private armLocal(t: TimerRef, fireAt: number): void {
    const key = jobName(t);
    this.local.get(key)?.cancel();
    const h = this.clock.after(Math.max(0, fireAt - this.clock.now()), () => {
      this.local.delete(key);
      this.fire(t).catch((e) => {
        this.log.warn({ err: e, instanceId: t.instanceId }, 'delivering a workflow timer failed; retrying in 1s');
        this.armLocal(t, this.clock.now() + REFIRE_MS);
      });
    });
    this.local.set(key, h);
  }
}

function jobName(t: TimerRef): string {
  return `${t.instanceId}||${t.executionId}||${t.timerId}`;
}
