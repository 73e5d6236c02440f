/**
 * What a mutation of the instance table works on: a draft of one instance. A mutation reads the
 * draft and emits events (reducer.ts), which change the draft and become the journal batch of
 * the write; what touches the outside world goes to `effects`, run once the write succeeded.
 */
import type { HistoryEvent } from './proto.ts';
import type { InstanceRecord, InstanceState } from './record.ts';
import { applyEvent, draftOf, type Instance, type InstanceEvent } from './reducer.ts';

export interface Draft {
  /** The state after the events emitted so far; undefined when the instance does not exist. */
  readonly rec: Readonly<InstanceState> | undefined;
  /** The history shown to workers, after the events emitted so far. */
  readonly history: readonly HistoryEvent[];
  /** Applies events to the draft; they are written with the next group commit. */
  emit(...events: InstanceEvent[]): void;
  /** Run after the write succeeded, in order. */
  readonly effects: (() => void)[];
}

export type Mutation<T> = (d: Draft) => T;

/** A mutation waiting for its write, with its outcome once it ran on a draft. */
export interface PendingMutation {
  fn: Mutation<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  result?: unknown;
  error?: unknown;
  ok?: boolean;
}

/**
 * The draft one write's mutations share. The committed record and history are copied on the
 * first event, so mutations that only read cost no copy and a failed write leaves the cache as
 * it was.
 */
export class WorkingCopy implements Draft {
  private inst: Instance;
  private copied = false;
  /** The events emitted, in order: the journal batch of this write. */
  readonly events: InstanceEvent[] = [];
  readonly effects: (() => void)[] = [];

  constructor(rec: InstanceRecord | undefined, history: HistoryEvent[]) {
    this.inst = { rec, history };
  }

  get rec(): Readonly<InstanceState> | undefined {
    return this.inst.rec;
  }

  get history(): readonly HistoryEvent[] {
    return this.inst.history;
  }

  get state(): Instance {
    return this.inst;
  }

  emit(...events: InstanceEvent[]): void {
    if (!this.copied) {
      this.inst = { rec: this.inst.rec && draftOf(this.inst.rec), history: [...this.inst.history] };
      this.copied = true;
    }
    for (const e of events) {
      this.inst = applyEvent(this.inst, e);
      this.events.push(e);
    }
  }

  /** Runs the mutations in order; each one's result or error is kept for its caller. */
  run(pending: PendingMutation[]): void {
    for (const p of pending) {
      try {
        p.result = p.fn(this);
        p.ok = true;
      } catch (e) {
        p.error = e;
        p.ok = false;
      }
    }
  }
}
