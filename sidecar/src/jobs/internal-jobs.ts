/**
 * InternalJobs for other building blocks (workflow timers, activity retries): reminders in
 * a namespace per owner, stored in the same scheduler as the app's jobs but never listed by
 * the jobs API nor delivered to the app.
 */
import { SchedulerError, type SchedulerClient, type Trigger, validateName } from '../../../scheduler/src/index.ts';
import type { InternalJobTrigger, InternalJobs, RepeatingJob } from './internal.ts';

type Handler = (t: InternalJobTrigger) => Promise<void>;

/** How long a trigger waits for its owner's handler to be registered before it counts as failed. */
const HANDLER_WAIT_MS = 30_000;

export class InternalJobsService implements InternalJobs {
  private readonly client: SchedulerClient;
  private readonly namespace: string;
  private readonly appId: string;
  private readonly handlers = new Map<string, Handler>();
  private readonly waiters = new Map<string, (() => void)[]>();

  constructor(client: SchedulerClient, namespace: string, appId: string) {
    this.client = client;
    this.namespace = namespace;
    this.appId = appId;
  }

  async scheduleOnce(owner: string, name: string, dueAt: number, data: unknown): Promise<void> {
    validateName(owner, 'owner');
    if (!Number.isFinite(dueAt)) throw new TypeError(`dueAt must be ms since epoch, got ${dueAt}`);
    await this.client.schedule(
      { namespace: this.namespace, appId: this.appId, owner, name },
      // a lost timer stalls a workflow: retry every second until the owner takes it
      { dueTime: new Date(dueAt).toISOString(), dataJson: data === undefined ? undefined : JSON.stringify(data), failurePolicy: { kind: 'constant', intervalMs: 1000 } },
      true,
    );
  }

  async schedule(owner: string, name: string, spec: RepeatingJob, data: unknown, overwrite = true): Promise<void> {
    validateName(owner, 'owner');
    await this.client.schedule(
      { namespace: this.namespace, appId: this.appId, owner, name },
      {
        dueTime: new Date(spec.dueAt).toISOString(),
        schedule: spec.everyMs === undefined ? undefined : `@every ${spec.everyMs}ms`,
        repeats: spec.repeats,
        ttl: spec.expiresAt === undefined ? undefined : new Date(spec.expiresAt).toISOString(),
        dataJson: data === undefined ? undefined : JSON.stringify(data),
        failurePolicy: spec.failurePolicy,
      },
      overwrite,
    );
  }

  async get(owner: string, name: string): Promise<{ data: unknown } | undefined> {
    validateName(owner, 'owner');
    try {
      const r = await this.client.get({ namespace: this.namespace, appId: this.appId, owner, name });
      return { data: r.spec.dataJson === undefined ? undefined : JSON.parse(r.spec.dataJson) };
    } catch (e) {
      if (e instanceof SchedulerError && e.kind === 'not_found') return undefined;
      throw e;
    }
  }

  async list(owner: string): Promise<{ name: string; data: unknown }[]> {
    validateName(owner, 'owner');
    const jobs = await this.client.list({ namespace: this.namespace, appId: this.appId, owner });
    return jobs.map((j) => ({ name: j.key.name, data: j.spec.dataJson === undefined ? undefined : JSON.parse(j.spec.dataJson) }));
  }

  async delete(owner: string, name: string): Promise<void> {
    validateName(owner, 'owner');
    await this.client.delete({ namespace: this.namespace, appId: this.appId, owner, name });
  }

  onTrigger(owner: string, handler: Handler): void {
    this.handlers.set(owner, handler);
    for (const w of this.waiters.get(owner) ?? []) w();
    this.waiters.delete(owner);
  }

  /** Called for triggers whose owner is not the app. */
  async deliver(t: Trigger): Promise<boolean> {
    let handler = this.handlers.get(t.key.owner);
    if (!handler) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, HANDLER_WAIT_MS);
        timer.unref();
        const list = this.waiters.get(t.key.owner) ?? [];
        list.push(() => {
          clearTimeout(timer);
          resolve();
        });
        this.waiters.set(t.key.owner, list);
      });
      handler = this.handlers.get(t.key.owner);
      if (!handler) return false;
    }
    try {
      await handler({ owner: t.key.owner, name: t.key.name, data: t.dataJson === undefined ? undefined : JSON.parse(t.dataJson), dueAt: t.dueAt });
      return true;
    } catch {
      return false;
    }
  }
}
