/**
 * The actors active on this host: one activation per type and id, each with its turns and its
 * timers. An activation starts with its first call and ends when it has been idle for its
 * type's actorIdleTimeout (checked every actorScanInterval), when placement moves it away, or
 * when the sidecar stops; ending takes the actor's turn (no call runs meanwhile), drops its
 * timers and tells the app (DELETE /actors/<type>/<id>). A call that comes while an activation
 * ends waits for the end and starts a new one.
 */
import type { Logger } from 'pino';
import type { ActorApp } from './app-calls.ts';
import { DEFAULTS, type ActorTypeConfig } from './config.ts';
import { Turns } from './turns.ts';

export class Activation {
  readonly turns = new Turns();
  /** Timers by name: how to cancel each. */
  readonly timers = new Map<string, () => void>();
  closing?: Promise<void>;
  readonly type: string;
  readonly id: string;

  constructor(type: string, id: string) {
    this.type = type;
    this.id = id;
  }

  dropTimers(): void {
    for (const cancel of this.timers.values()) cancel();
    this.timers.clear();
  }
}

export interface Turn {
  act: Activation;
  release: () => void;
}

const NO_REENTRANCY = { enabled: false, maxStackDepth: 1 };

export class ActorTable {
  private readonly actors = new Map<string, Activation>();
  private readonly app: ActorApp;
  private readonly log: Logger;
  private readonly configOf: (type: string) => ActorTypeConfig;
  private scanTimer?: NodeJS.Timeout;

  constructor(app: ActorApp, log: Logger, configOf: (type: string) => ActorTypeConfig) {
    this.app = app;
    this.log = log;
    this.configOf = configOf;
  }

  /**
   * Takes the actor's turn, activating it when it is not active. `chain`: the reentrancy id;
   * `waitMs`: how long to wait behind other calls at most (TurnTimeoutError past it).
   */
  async enter(type: string, id: string, chain: string | undefined, waitMs?: number): Promise<Turn> {
    const key = keyOf(type, id);
    for (;;) {
      let act = this.actors.get(key);
      if (act?.closing) {
        await act.closing;
        continue;
      }
      if (!act) {
        act = new Activation(type, id);
        this.actors.set(key, act);
      }
      const release = await act.turns.enter(chain, this.configOf(type).reentrancy, waitMs);
      // the activation may have ended while this call waited behind a deactivation's turn
      if (this.actors.get(key) !== act) {
        release();
        continue;
      }
      return { act, release };
    }
  }

  /** Takes the turn of an actor only when it is active (timers: they never activate one). */
  async enterActive(act: Activation): Promise<(() => void) | undefined> {
    if (act.closing || this.actors.get(keyOf(act.type, act.id)) !== act) return undefined;
    const release = await act.turns.enter(undefined, NO_REENTRANCY);
    if (act.closing || this.actors.get(keyOf(act.type, act.id)) !== act) {
      release();
      return undefined;
    }
    return release;
  }

  active(type: string, id: string): Activation | undefined {
    const act = this.actors.get(keyOf(type, id));
    return act && !act.closing ? act : undefined;
  }

  /** Active actors per type. */
  counts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const a of this.actors.values()) out.set(a.type, (out.get(a.type) ?? 0) + 1);
    return out;
  }

  startIdleScan(intervalMs: number): void {
    clearInterval(this.scanTimer);
    this.scanTimer = setInterval(() => this.scan(Date.now()), intervalMs);
    this.scanTimer.unref();
  }

  /** Ends every activation idle longer than its type's idle timeout. */
  scan(now: number): void {
    for (const act of this.actors.values()) {
      if (act.closing || act.turns.busy) continue;
      if (now - act.turns.lastUsed >= this.configOf(act.type).idleTimeoutMs) void this.deactivate(act, 0);
    }
  }

  /**
   * Ends an activation: waits for its turn (at most `drainMs` when given: past it, the call in
   * flight is left to finish on its own), drops its timers, tells the app.
   */
  deactivate(act: Activation, drainMs?: number): Promise<void> {
    act.closing ??= (async () => {
      const turn = act.turns.enter(undefined, NO_REENTRANCY);
      let release: (() => void) | undefined;
      if (drainMs === undefined || drainMs <= 0 || typeof turn === 'function') release = await turn;
      else {
        let timer: NodeJS.Timeout | undefined;
        release = await Promise.race([turn, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), drainMs)))]);
        clearTimeout(timer);
        if (!release) void Promise.resolve(turn).then((r) => r());
      }
      act.dropTimers();
      this.actors.delete(keyOf(act.type, act.id));
      try {
        const res = await this.app.deactivate(act.type, act.id);
        if (res.status >= 300) this.log.warn({ actorType: act.type, actorId: act.id, status: res.status }, 'the app answered the deactivation with an error');
      } catch (e) {
        this.log.warn({ actorType: act.type, actorId: act.id, err: (e as Error).message }, 'the app did not take the deactivation');
      } finally {
        release?.();
      }
    })();
    return act.closing;
  }

  /**
   * Ends every activation `which` picks (shutdown, or placement moved them): their calls first,
   * each type's drainOngoingCallTimeout at most (and `capMs`: a shutdown does not wait a minute).
   */
  async drain(which: (act: Activation) => boolean = () => true, capMs = Number.POSITIVE_INFINITY): Promise<void> {
    await Promise.all(this.startDrain(which, capMs).map((e) => e.ended));
  }

  /**
   * Starts ending every activation `which` picks, as drain(); resolves once those that had no call
   * in flight or waiting have ended (a new placement table is acknowledged then: the busy ones
   * end on their own, after their calls).
   */
  async drainIdle(which: (act: Activation) => boolean): Promise<void> {
    await Promise.all(this.startDrain(which, Number.POSITIVE_INFINITY).flatMap((e) => (e.busy ? [] : [e.ended])));
  }

  private startDrain(which: (act: Activation) => boolean, capMs: number): { busy: boolean; ended: Promise<void> }[] {
    return [...this.actors.values()].filter(which).map((a) => {
      const cfg = this.configOf(a.type) ?? DEFAULTS;
      const busy = a.turns.busy;
      return { busy, ended: this.deactivate(a, Math.min(capMs, cfg.drainRebalancedActors ? cfg.drainOngoingCallTimeoutMs : 1)) };
    });
  }

  close(): void {
    clearInterval(this.scanTimer);
  }
}

export function keyOf(type: string, id: string): string {
  return `${type}||${id}`;
}
