/**
 * How a sidecar talks to a scheduler: the same interface whether the scheduler runs in the
 * sidecar's process (embedded standalone default, no network hop) or behind gRPC.
 */
import type { SchedulerEngine } from './engine.ts';
import type { JobKey, JobOwnerRef, JobRecord, JobSpec, Target, Trigger } from './types.ts';

/** Resolves true when the trigger was handled (ack success), false to fail it. */
export type TriggerHandler = (t: Trigger) => Promise<boolean>;

/** How long a closing client lets triggers already being handled finish and ack. */
export const CLOSE_DRAIN_MS = 2000;

/** Resolves when `done()` holds or after `ms`. */
export async function settle(done: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
}

export interface SchedulerClient {
  /** Addresses of the scheduler hosts this client has a live stream to (metadata). */
  connectedAddresses(): string[];
  schedule(key: JobKey, spec: JobSpec, overwrite: boolean): Promise<void>;
  /** Throws SchedulerError kind 'not_found' when there is no such job. */
  get(key: JobKey): Promise<JobRecord>;
  delete(key: JobKey): Promise<void>;
  list(ref: JobOwnerRef): Promise<JobRecord[]>;
  /**
   * Starts receiving the triggers of one app; call once. `appJobs: false` (a sidecar without
   * an app channel) takes only internal jobs; the app's own wait for a sidecar with an app.
   */
  watch(target: Target, handler: TriggerHandler, opts?: { appJobs?: boolean }): void;
  close(): Promise<void>;
}

/** A client calling an engine in the same process. */
export class InProcessClient implements SchedulerClient {
  private readonly engine: SchedulerEngine;
  private disconnect?: () => void;
  private readonly ownsEngine: boolean;
  /** Triggers being handled; a graceful close lets them finish, so they are not sent again. */
  private active = 0;
  private draining = false;

  constructor(engine: SchedulerEngine, ownsEngine: boolean) {
    this.engine = engine;
    this.ownsEngine = ownsEngine;
  }

  /** No network address: an in-process scheduler is not a "connected scheduler host". */
  connectedAddresses(): string[] {
    return [];
  }

  schedule(key: JobKey, spec: JobSpec, overwrite: boolean): Promise<void> {
    return this.engine.schedule(key, spec, overwrite);
  }

  get(key: JobKey): Promise<JobRecord> {
    return this.engine.get(key);
  }

  delete(key: JobKey): Promise<void> {
    return this.engine.delete(key);
  }

  list(ref: JobOwnerRef): Promise<JobRecord[]> {
    return this.engine.list(ref);
  }

  watch(target: Target, handler: TriggerHandler, opts: { appJobs?: boolean } = {}): void {
    const engine = this.engine;
    // hand triggers over a turn of the event loop later, in batches, as the gRPC stream does:
    // the engine's timer tick stays short even when thousands come due at once
    let batch: Trigger[] = [];
    // one promise reaction per trigger (not then + finally): a burst hands over thousands
    const settled = (id: string, ok: boolean) => {
      this.active--;
      engine.ack(id, ok);
    };
    const run = () => {
      const out = batch;
      batch = [];
      for (const t of out) {
        if (this.draining) continue; // not acked: fired again after the next start
        this.active++;
        handler(t).then(
          (ok) => settled(t.id, ok),
          () => settled(t.id, false),
        );
      }
    };
    this.disconnect = engine.connect(target, {
      name: 'in-process',
      appJobs: opts.appJobs ?? true,
      send: (t) => {
        if (batch.length === 0) setImmediate(run);
        batch.push(t);
      },
    });
  }

  async close(): Promise<void> {
    this.draining = true;
    await settle(() => this.active === 0, CLOSE_DRAIN_MS);
    this.disconnect?.();
    if (this.ownsEngine) await this.engine.close();
  }
}
