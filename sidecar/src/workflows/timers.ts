/**
 * Durable timers. With the scheduler's internal jobs (the normal case) a timer is a one-shot
 * job owned by `workflows`, so it survives a restart of the sidecar. Without them the timers
 * run in this process; they are still durable, because the instance record keeps every
 * pending timer and the engine arms them again when it starts.
 */
import type { Logger } from 'pino';
import type { InternalJobs } from '../jobs/internal.ts';

export const TIMER_OWNER = 'workflows';

export interface TimerRef {
  instanceId: string;
  executionId: string;
  /** Orchestrator timer id, or `start` for a delayed start. */
  timerId: string;
}

/** Longest setTimeout delay node accepts; longer timers are re-armed in steps. */
const MAX_DELAY = 2_147_000_000;

export class Timers {
  private readonly jobs?: InternalJobs;
  private readonly local = new Map<string, NodeJS.Timeout>();
  private readonly log: Logger;
  private fire: (t: TimerRef) => Promise<void> = async () => undefined;

  constructor(jobs: InternalJobs | undefined, log: Logger) {
    this.jobs = jobs;
    this.log = log;
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
    const h = this.local.get(key);
    if (h) {
      clearTimeout(h);
      this.local.delete(key);
    }
    if (this.jobs) await this.jobs.delete(TIMER_OWNER, key).catch((e) => this.log.debug({ err: e }, 'deleting a workflow timer job failed'));
  }

  close(): void {
    for (const h of this.local.values()) clearTimeout(h);
    this.local.clear();
  }

  private armLocal(t: TimerRef, fireAt: number): void {
    const key = jobName(t);
    const prev = this.local.get(key);
    if (prev) clearTimeout(prev);
    const delay = Math.max(0, fireAt - Date.now());
    const h = setTimeout(() => {
      this.local.delete(key);
      if (delay > MAX_DELAY) return this.armLocal(t, fireAt);
      this.fire(t).catch((e) => {
        this.log.warn({ err: e, instanceId: t.instanceId }, 'delivering a workflow timer failed; retrying in 1s');
        this.armLocal(t, Date.now() + 1000);
      });
    }, Math.min(delay, MAX_DELAY));
    h.unref?.();
    this.local.set(key, h);
  }
}

function jobName(t: TimerRef): string {
  return `${t.instanceId}||${t.executionId}||${t.timerId}`;
}
