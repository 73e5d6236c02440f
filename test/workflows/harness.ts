/**
 * The workflow engine without gRPC, for tests: a store in memory (or the one given), a fake
 * worker stream that keeps every work item, timers the test fires itself, and `settle()`, which
 * waits until nothing moves any more (writes, their effects, the runs they dispatch) instead of
 * sleeping.
 */
import pino from 'pino';
import { factory as memoryFactory } from '../../sidecar/src/components/state/in-memory/index.ts';
import type { ComponentSpec, StateStore, StateTransactionOperation } from '../../sidecar/src/components/types.ts';
import type { ManualClock } from '../../shared/clock.ts';
import { Engine } from '../../sidecar/src/workflows/engine.ts';
import { InstanceTable } from '../../sidecar/src/workflows/instances.ts';
import type { ActivityRequest, HistoryEvent, OrchestratorRequest, WorkItem } from '../../sidecar/src/workflows/proto.ts';
import { Timers, type TimerRef } from '../../sidecar/src/workflows/timers.ts';
import { Workers } from '../../sidecar/src/workflows/workers.ts';

export const log = pino({ level: 'silent' });
export const PEER = 'ipv4:127.0.0.1:1';
export const PREFIX = 'a||wf||';
const spec: ComponentSpec = { name: 's', type: 'state.in-memory', version: 'v1', metadata: {}, secretKeys: [], initTimeoutMs: 5000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test' };

/** The member that says what an event is (`taskScheduled`, `timerFired`, …). */
export function kindOf(e: HistoryEvent): string {
  return Object.keys(e).find((k) => k !== 'eventId' && k !== 'timestamp' && k !== 'eventType') ?? '?';
}

/** Timers the test fires itself (`fire`), with what is armed. */
export class HeldTimers {
  readonly armed = new Map<string, TimerRef>();
  fire: (t: TimerRef) => Promise<void> = async () => undefined;
  readonly durableInScheduler = false;
  onFire(fn: (t: TimerRef) => Promise<void>): void {
    this.fire = fn;
  }
  async arm(t: TimerRef): Promise<void> {
    this.armed.set(timerKey(t), t);
  }
  async cancel(t: TimerRef): Promise<void> {
    this.armed.delete(timerKey(t));
  }
  close(): void {}
}

export function timerKey(t: TimerRef): string {
  return `${t.instanceId}|${t.executionId}|${t.timerId}`;
}

export type EngineHarness = Awaited<ReturnType<typeof engineHarness>>;

/**
 * An engine on `existing` (a restart) or on a new store in memory, with one worker stream
 * connected; `shared`: written as a store other replicas share (etag checks). With `clock`, the
 * engine, its workers and its in-process durable timers run on that clock (fake time);
 * without, the test fires timers itself (`timers`).
 */
export async function engineHarness(existing?: StateStore, opts: { shared?: boolean; clock?: ManualClock } = {}) {
  const store = existing ?? (memoryFactory() as StateStore);
  if (!existing) await store.init(spec, { appId: 'a', namespace: 'default', log });
  // writes can be held back (`slow.until`) to widen the windows where runs could overlap, or fail (`slow.fail`)
  const slow: { until?: Promise<void>; fail?: number } = {};
  let writes = 0;
  const raw = (store as { rawTransact?: StateStore['transact'] }).rawTransact ?? store.transact!.bind(store);
  (store as { rawTransact?: StateStore['transact'] }).rawTransact = raw;
  store.transact = async (ops: StateTransactionOperation[]) => {
    writes++;
    await slow.until;
    if (slow.fail) {
      slow.fail--;
      throw new Error('the store is down (test)');
    }
    return raw(ops);
  };
  const table = new InstanceTable({ store, prefix: PREFIX, shared: opts.shared ?? false, replicaId: 'local', log });
  const workers = new Workers(log, 100, opts.clock);
  const timers = new HeldTimers();
  const engine = opts.clock ? new Engine(table, workers, new Timers(undefined, log, opts.clock), log, 'a', opts.clock) : new Engine(table, workers, timers as unknown as Timers, log, 'a');
  const items: WorkItem[] = [];
  /** Runs sent and not answered through `answered`, by instance. */
  const open = new Map<string, OrchestratorRequest>();
  /** Activities sent and not taken by the test. */
  const activities: ActivityRequest[] = [];
  const stream = {
    getPeer: () => PEER,
    write: (w: WorkItem) => {
      const copy = structuredClone(w);
      items.push(copy);
      if ('orchestratorRequest' in copy) open.set(copy.orchestratorRequest.instanceId, copy.orchestratorRequest);
      else activities.push(copy.activityRequest);
    },
    end: () => undefined,
  };
  const streamId = workers.addStream(stream as never);

  /** Until nothing moves: writes, their effects, the runs they dispatch. */
  const settle = async () => {
    let quiet = 0;
    for (let last = ''; quiet < 3; ) {
      await table.drain();
      await new Promise((r) => setImmediate(r));
      const now = `${writes}/${items.length}`;
      quiet = now === last ? quiet + 1 : 0;
      last = now;
    }
  };

  return {
    store,
    table,
    engine,
    workers,
    timers,
    items,
    open,
    activities,
    slow,
    settle,
    streamId,
    stream,
    writes: () => writes,
    runs: () => items.flatMap((w) => ('orchestratorRequest' in w ? [w.orchestratorRequest] : [])),
  };
}
