/**
 * Connected workers (GetWorkItems streams) and the work waiting for them. Each stream gets at
 * most `maxPerWorker` items in flight (the SDK workers drop what overflows their own queue);
 * orchestrator runs and activities are handed to the least busy stream. When a stream goes
 * away, everything it had in flight is queued again for the next worker.
 */
import { randomUUID } from 'node:crypto';
import type { ServerWritableStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { SYSTEM_CLOCK, type Clock } from '../../../shared/clock.ts';
import type { HistoryEvent, OrchestratorRequest, PropagatedHistory, WorkItem } from './proto.ts';
import type { TraceContextMessage } from '../tracing/workflows.ts';

export interface ActivityTask {
  instanceId: string;
  executionId: string;
  taskId: number;
  name: string;
  input?: string;
  /** The history the workflow hands this activity (Dapr protocol; rebuilt from the history, not stored). */
  propagatedHistory?: PropagatedHistory;
  /** The activity span's context, while tracing is on (the worker's parentTraceContext). */
  trace?: TraceContextMessage;
}

/** What an orchestrator run was given: needed to apply its answer. */
export interface OrchestratorRun {
  executionId: string;
  /** Inbox events included (the first `taken` of the inbox). */
  taken: number;
  started: HistoryEvent;
}

interface Stream {
  id: number;
  call: ServerWritableStream<unknown, WorkItem>;
  peer: string;
  busy: number;
}

interface Inflight<T> {
  stream: Stream;
  item: T;
  /** The work item's completionToken (names it in AbandonTask*WorkItem). */
  token: string;
  /** The answer arrived and is being stored. */
  answered?: boolean;
  /** Asked to run again while in flight: queued once this run is stored. */
  again?: boolean;
}

export interface WorkSource {
  /** Builds the next run of an instance, or undefined when it has nothing to run. */
  prepareRun(instanceId: string): Promise<{ request: OrchestratorRequest; run: OrchestratorRun } | undefined>;
  /** false when a queued activity was answered meanwhile (e.g. by a worker from before a restart). */
  activityWanted(t: ActivityTask): boolean;
  /** A worker stream opened (stalled runs may find their version there). */
  workerConnected?(): void;
}

export class Workers {
  private readonly streams = new Map<number, Stream>();
  private nextId = 1;
  /** Instances waiting for a run, in order (queued = membership, so each is queued once). */
  private orchQueue: string[] = [];
  private orchHead = 0;
  private readonly queued = new Set<string>();
  private readonly actQueue: ActivityTask[] = [];
  private actHead = 0;
  private readonly orchInflight = new Map<string, Inflight<OrchestratorRun>>();
  private readonly actInflight = new Map<string, Inflight<ActivityTask>>();
  /** Instances whose run is being prepared (async history load). */
  private readonly preparing = new Set<string>();
  private pumping = false;
  private source?: WorkSource;
  private readonly log: Logger;
  private readonly clock: Clock;
  readonly maxPerWorker: number;

  /** `clock`: the pauses before work is dispatched again (tests pass a ManualClock). */
  constructor(log: Logger, maxPerWorker: number, clock: Clock = SYSTEM_CLOCK) {
    this.log = log;
    this.maxPerWorker = maxPerWorker;
    this.clock = clock;
  }

  attach(source: WorkSource): void {
    this.source = source;
  }

  get connected(): number {
    return this.streams.size;
  }

  activityCount(): number {
    return this.actInflight.size + (this.actQueue.length - this.actHead);
  }

  addStream(call: ServerWritableStream<unknown, WorkItem>): number {
    const s: Stream = { id: this.nextId++, call, peer: call.getPeer(), busy: 0 };
    this.streams.set(s.id, s);
    this.log.info({ worker: s.id, peer: s.peer }, 'workflow worker connected');
    this.source?.workerConnected?.();
    this.pump();
    return s.id;
  }

  removeStream(id: number): void {
    const s = this.streams.get(id);
    if (!s) return;
    this.streams.delete(id);
    let requeued = 0;
    for (const [iid, f] of this.orchInflight) {
      if (f.stream !== s || f.answered) continue;
      this.orchInflight.delete(iid);
      this.queueRun(iid);
      requeued++;
    }
    for (const [key, f] of this.actInflight) {
      if (f.stream !== s) continue;
      this.actInflight.delete(key);
      this.actQueue.push(f.item);
      requeued++;
    }
    this.log.info({ worker: id, requeued }, 'workflow worker disconnected; its work items are queued again');
    this.pump();
  }

  /** Ends every stream (shutdown): the SDK workers reconnect to the next sidecar. */
  endAll(): void {
    for (const s of this.streams.values()) {
      try {
        s.call.end();
      } catch {
        // already gone
      }
    }
    this.streams.clear();
  }

  enqueueRun(instanceId: string): void {
    const f = this.orchInflight.get(instanceId);
    if (f) {
      // never two runs of one instance at a time: the next starts once this one is stored
      f.again = true;
      return;
    }
    this.queueRun(instanceId);
    this.pump();
  }

  private queueRun(instanceId: string): void {
    if (this.queued.has(instanceId)) return;
    this.queued.add(instanceId);
    this.orchQueue.push(instanceId);
  }

  private nextRun(): string | undefined {
    while (this.orchHead < this.orchQueue.length) {
      const id = this.orchQueue[this.orchHead++];
      if (this.orchHead > 1024 && this.orchHead * 2 > this.orchQueue.length) {
        this.orchQueue = this.orchQueue.slice(this.orchHead);
        this.orchHead = 0;
      }
      if (this.queued.delete(id)) return id;
    }
    return undefined;
  }

  enqueueActivity(t: ActivityTask): void {
    const key = actKey(t.instanceId, t.taskId);
    if (this.actInflight.get(key)?.item.executionId === t.executionId) return;
    this.actQueue.push(t);
    this.pump();
  }

  /**
   * The run an answer belongs to; undefined when it is not ours (stale, unknown, or already
   * answered). The run stays in flight until finishRun(), so that no other run of the instance
   * starts from a state the answer has not been applied to yet.
   */
  answerRun(instanceId: string, peer: string): OrchestratorRun | undefined {
    const f = this.orchInflight.get(instanceId);
    if (!f || f.answered || f.stream.peer !== peer) return undefined;
    f.answered = true;
    return f.item;
  }

  /** The answer of a run is stored (or given up): frees the slot, starts a run asked for meanwhile. */
  finishRun(instanceId: string): void {
    const f = this.orchInflight.get(instanceId);
    if (!f) return;
    this.orchInflight.delete(instanceId);
    if (f.again) this.queueRun(instanceId);
    this.release(f.stream);
  }

  /** Forgets a queued or running orchestrator run (instance finished or was terminated). */
  dropRun(instanceId: string): void {
    this.queued.delete(instanceId);
  }

  takeActivity(instanceId: string, taskId: number, peer: string): ActivityTask | undefined {
    const key = actKey(instanceId, taskId);
    const f = this.actInflight.get(key);
    if (!f) return undefined;
    if (f.stream.peer !== peer && this.streams.has(f.stream.id)) return undefined;
    this.actInflight.delete(key);
    this.release(f.stream);
    return f.item;
  }

  /**
   * A worker gives a work item back (AbandonTask*WorkItem): it is dispatched again, to any
   * worker, after a pause (so that a worker that cannot take it does not spin on it).
   * false when the token names nothing in flight (answered, given back, or not ours).
   */
  abandon(kind: 'run' | 'activity', token: string): boolean {
    const key = tokenKey(token);
    if (key === undefined) return false;
    if (kind === 'run') {
      const f = this.orchInflight.get(key);
      if (!f || f.token !== token || f.answered) return false;
      this.orchInflight.delete(key);
      this.release(f.stream);
      this.clock.after(ABANDON_PAUSE_MS, () => this.enqueueRun(key));
      return true;
    }
    const f = this.actInflight.get(key);
    if (!f || f.token !== token) return false;
    this.actInflight.delete(key);
    this.release(f.stream);
    this.clock.after(ABANDON_PAUSE_MS, () => this.enqueueActivity(f.item));
    return true;
  }

  private release(s: Stream): void {
    s.busy = Math.max(0, s.busy - 1);
    this.pump();
  }

  private pickStream(): Stream | undefined {
    let best: Stream | undefined;
    for (const s of this.streams.values()) if (s.busy < this.maxPerWorker && (!best || s.busy < best.busy)) best = s;
    return best;
  }

  /** Hands queued work to streams with room. */
  pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        const s = this.pickStream();
        if (!s) break;
        // activities first: they are what orchestrators wait on, and they never need a store read
        if (this.actHead < this.actQueue.length) {
          const t = this.actQueue[this.actHead++];
          if (this.actHead > 1024 && this.actHead * 2 > this.actQueue.length) {
            this.actQueue.splice(0, this.actHead);
            this.actHead = 0;
          }
          if (this.source && !this.source.activityWanted(t)) continue;
          this.sendActivity(s, t);
          continue;
        }
        const iid = this.nextRun();
        if (iid === undefined) break;
        if (this.orchInflight.has(iid) || this.preparing.has(iid)) continue;
        s.busy++;
        this.preparing.add(iid);
        void this.sendRun(s, iid);
      }
    } finally {
      this.pumping = false;
    }
  }

  private sendActivity(s: Stream, t: ActivityTask): void {
    const key = actKey(t.instanceId, t.taskId);
    s.busy++;
    const token = workToken(key);
    this.actInflight.set(key, { stream: s, item: t, token });
    const item: WorkItem = {
      completionToken: token,
      activityRequest: {
        name: t.name,
        input: t.input === undefined ? undefined : { value: t.input },
        orchestrationInstance: { instanceId: t.instanceId, executionId: { value: t.executionId } },
        taskId: t.taskId,
        parentTraceContext: t.trace,
        propagatedHistory: t.propagatedHistory,
      },
    };
    try {
      s.call.write(item);
    } catch (e) {
      this.log.warn({ err: e }, 'writing an activity work item failed');
    }
  }

  private async sendRun(s: Stream, iid: string): Promise<void> {
    let prepared: Awaited<ReturnType<WorkSource['prepareRun']>>;
    try {
      prepared = await this.source?.prepareRun(iid);
    } catch (e) {
      this.log.error({ err: e, instanceId: iid }, 'preparing an orchestrator work item failed; retrying');
      this.clock.after(PREPARE_RETRY_MS, () => this.enqueueRun(iid));
    }
    this.preparing.delete(iid);
    if (!prepared || !this.streams.has(s.id)) {
      if (prepared) this.queueRun(iid);
      this.release(s);
      return;
    }
    const token = workToken(iid);
    this.orchInflight.set(iid, { stream: s, item: prepared.run, token });
    try {
      s.call.write({ orchestratorRequest: prepared.request, completionToken: token });
    } catch (e) {
      this.log.warn({ err: e }, 'writing an orchestrator work item failed');
    }
  }
}

/** Pause before an abandoned work item is dispatched again. */
export const ABANDON_PAUSE_MS = 500;
/** Pause before a run whose work item could not be built (a store read failed) is tried again. */
const PREPARE_RETRY_MS = 1000;

/** A completionToken: the in-flight key plus a nonce, so that a stale token never matches. */
function workToken(key: string): string {
  return Buffer.from(JSON.stringify([key, randomUUID()])).toString('base64url');
}

function tokenKey(token: string): string | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' ? v[0] : undefined;
  } catch {
    return undefined;
  }
}

function actKey(instanceId: string, taskId: number): string {
  return `${instanceId}#${taskId}`;
}
