/**
 * The workflow engine: Durable Task semantics on top of the instance table, put together from
 * its parts.
 *
 * An instance moves forward in *runs*: the orchestrator (in a worker) gets its past history
 * plus the new events (OrchestratorStarted first, carrying the deterministic clock, then what
 * waited in the inbox) and answers with actions. Applying the answer appends one journal batch
 * and turns actions into activities, timers, sub-orchestrations and events. Activity results,
 * timers and raised events land in the inbox and make the instance runnable again.
 *
 * - client.ts: the client API (start, raise, suspend/resume, terminate, purge, rerun, waits);
 * - runs.ts: runs sent to workers, their answers and activity results, timers that fire;
 * - interpreter.ts: an answer's actions applied to an instance; stalls (stalls.ts);
 * - recovery.ts: what a restarted replica resumes and what it adopts from a dead one;
 * - lifecycle.ts: the steps they share; messages.ts: the proto messages built from state;
 * - reducer.ts: the only code that changes an instance's state, from the events they emit.
 */
import type { Logger } from 'pino';
import { SYSTEM_CLOCK, type Clock } from '../../../shared/clock.ts';
import { ClientApi, type RerunRequest, type StartRequest } from './client.ts';
import type { EngineDeps } from './deps.ts';
import type { InstanceTable } from './instances.ts';
import { ActionInterpreter } from './interpreter.ts';
import { Lifecycle } from './lifecycle.ts';
import type { ActivityResponse, HistoryEvent, OrchestratorResponse } from './proto.ts';
import type { InstanceRecord, InstanceState } from './record.ts';
import { Recovery } from './recovery.ts';
import { Runs } from './runs.ts';
import { StallRetries } from './stalls.ts';
import type { Timers } from './timers.ts';
import { Waiters } from './waiters.ts';
import type { Workers } from './workers.ts';
import type { WorkflowTracing } from '../tracing/workflows.ts';

export type { StartRequest } from './client.ts';

export class Engine {
  readonly table: InstanceTable;
  readonly workers: Workers;
  private readonly timers: Timers;
  private readonly waiters: Waiters;
  private readonly stalls: StallRetries;
  private readonly client: ClientApi;
  private readonly runs: Runs;
  private readonly recovery: Recovery;
  /** Set once the sidecar shuts down: waits end with UNAVAILABLE instead of an answer. */
  closed = false;

  private readonly tracing?: WorkflowTracing;

  constructor(table: InstanceTable, workers: Workers, timers: Timers, log: Logger, appId = '', clock: Clock = SYSTEM_CLOCK, tracing?: WorkflowTracing) {
    const deps: EngineDeps = { table, workers, timers, log, clock, me: table.replicaId, appId, tracing };
    this.tracing = tracing;
    this.table = table;
    this.workers = workers;
    this.timers = timers;
    this.waiters = new Waiters(table, clock);
    const life = new Lifecycle(deps, this.waiters);
    this.client = new ClientApi(deps, life);
    this.stalls = new StallRetries(clock, (id) => table.mutate(id, (d) => life.makeRunnable(d)).catch((e) => log.error({ err: e, instanceId: id }, 'could not run a stalled workflow again')));
    this.runs = new Runs(deps, life, new ActionInterpreter(deps, life, this.client, this.stalls));
    this.recovery = new Recovery(deps, life, this.client);
    workers.attach({ prepareRun: (id) => this.runs.prepare(id), activityWanted: (t) => this.runs.activityWanted(t), workerConnected: () => this.stalls.all() });
    timers.onFire((t) => this.runs.timerFired(t));
  }

  close(): void {
    this.closed = true;
    this.stalls.close();
    this.waiters.close();
    this.timers.close();
    this.table.close();
    this.tracing?.close();
  }

  /** Set when new instances must not start (e.g. no durable store in a pod); the reason is the error. */
  get refuseStarts(): string | undefined {
    return this.client.refuseStarts;
  }

  set refuseStarts(reason: string | undefined) {
    this.client.refuseStarts = reason;
  }

  // client API (client.ts)
  start(req: StartRequest): Promise<string> {
    return this.client.start(req);
  }
  raiseEvent(id: string, name: string, input: string | undefined): Promise<void> {
    return this.client.raiseEvent(id, name, input);
  }
  terminate(id: string, output: string | undefined, recursive = true): Promise<void> {
    return this.client.terminate(id, output, recursive);
  }
  suspend(id: string, reason?: string): Promise<void> {
    return this.client.suspend(id, reason);
  }
  resume(id: string, reason?: string): Promise<void> {
    return this.client.resume(id, reason);
  }
  purge(id: string, recursive = true): Promise<number> {
    return this.client.purge(id, recursive);
  }
  history(id: string): Promise<HistoryEvent[]> {
    return this.client.history(id);
  }
  restart(id: string, newId: boolean): Promise<string> {
    return this.client.restart(id, newId);
  }
  rerun(req: RerunRequest): Promise<string> {
    return this.client.rerun(req);
  }
  get(id: string): Promise<InstanceRecord | undefined> {
    return this.client.get(id);
  }
  waitFor(id: string, until: (r: InstanceState | undefined) => boolean, signal?: AbortSignal): Promise<InstanceState | undefined> {
    return this.client.waitFor(id, until, signal);
  }

  // worker answers (runs.ts)
  completeOrchestrator(res: OrchestratorResponse, peer: string): Promise<void> {
    return this.runs.completeOrchestrator(res, peer);
  }
  completeActivity(res: ActivityResponse, peer: string): Promise<void> {
    return this.runs.completeActivity(res, peer);
  }

  // recovery and adoption (recovery.ts)
  recover(): Promise<number> {
    return this.recovery.recover();
  }
  adopt(deadReplica: string): Promise<number> {
    return this.recovery.adopt(deadReplica);
  }
}
