/**
 * Recovery and adoption: a restarted replica picks up what it was doing (the instances in its
 * index), and a live replica takes over a dead one's. Pending activities are dispatched again,
 * timers armed again, runs queued; cross-instance steps a crash may have lost are redone (a
 * child's start, a child's result, a recursive terminate).
 */
import type { ClientApi } from './client.ts';
import type { EngineDeps } from './deps.ts';
import type { Draft } from './instances.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { HistoryEvent } from './proto.ts';
import { isTerminal, type InstanceState, type ParentRef } from './record.ts';

export class Recovery {
  private readonly deps: EngineDeps;
  private readonly life: Lifecycle;
  private readonly client: ClientApi;

  constructor(deps: EngineDeps, life: Lifecycle, client: ClientApi) {
    this.deps = deps;
    this.life = life;
    this.client = client;
  }

  /** Picks up what this replica was doing before it stopped: runs, activities, timers. */
  async recover(): Promise<number> {
    const ids = await this.deps.table.loadIndex();
    const resumed = await this.resumeAll(ids, []);
    if (resumed) this.deps.log.info({ instances: resumed }, 'workflow instances resumed after restart');
    return resumed;
  }

  /** Takes over the instances of a replica that died (see replicas.ts). */
  async adopt(deadReplica: string): Promise<number> {
    const { table, log } = this.deps;
    const ids = await table.loadIndex(deadReplica);
    const n = await this.resumeAll(ids, [deadReplica]);
    await table.dropIndex(deadReplica);
    log.info({ replica: deadReplica, instances: n }, 'adopted the workflow instances of a dead replica');
    return n;
  }

  /** Takes over what `dead` replicas owned on each instance and re-dispatches what this replica owns. */
  private async resumeAll(ids: string[], dead: string[]): Promise<number> {
    let resumed = 0;
    await Promise.all(
      ids.map((id) =>
        this.deps.table
          .mutate(id, (d) => {
            // a finished or purged one leaves the list (instances.ts)
            if (!d.rec || isTerminal(d.rec.status)) return;
            resumed++;
            // the instance joins this replica's list with the event
            if (dead.length) d.emit({ rt: 'adopted', from: dead, by: this.deps.me, at: this.deps.clock.now() });
            this.resume(d, d.rec);
          })
          .catch((e) => this.deps.log.error({ err: e, instanceId: id }, 'resuming a workflow instance failed')),
      ),
    );
    return resumed;
  }

  private resume(d: Draft, rec: InstanceState): void {
    const { me, workers } = this.deps;
    const { id, executionId } = rec;
    this.life.dispatchOwnedActivities(d, rec, d.history);
    for (const [timerId, t] of Object.entries(rec.timers)) if (t.owner === me) this.life.armTimer(d, { instanceId: id, executionId, timerId }, t.fireAt);
    if (rec.lease?.owner === me) d.effects.push(() => workers.enqueueRun(id));
    else this.life.makeRunnable(d);
    // a parent terminated just before a crash may not have reached this child
    if (rec.parent) {
      const parentId = rec.parent.instanceId;
      d.effects.push(() => void this.terminateIfParentTerminated(id, parentId));
    }
    // sub-orchestrations whose start may have been lost in the crash
    for (const e of d.history) {
      const s = e.subOrchestrationInstanceCreated;
      if (!s) continue;
      const answered = (h: HistoryEvent) => (h.subOrchestrationInstanceCompleted?.taskScheduledId ?? h.subOrchestrationInstanceFailed?.taskScheduledId) === e.eventId;
      if (d.history.some(answered) || rec.inbox.some(answered)) continue;
      const parent: ParentRef = { instanceId: id, executionId, taskId: e.eventId, name: rec.name, version: rec.version };
      const propagated = this.life.propagatedAt(rec, d.history, e.eventId, 'subOrchestrationInstanceCreated');
      const child = { instanceId: s.instanceId, name: s.name, version: s.version?.value, input: s.input?.value, parent, propagated };
      d.effects.push(() => void this.client.ensureChild(child));
    }
  }

  private async terminateIfParentTerminated(id: string, parentId: string): Promise<void> {
    const parent = await this.deps.table.read(parentId).catch(() => undefined);
    if (parent?.status === 'TERMINATED' && parent.terminatedRecursively) await this.client.terminate(id, undefined, true).catch(() => undefined);
  }
}
