/**
 * One actor's turns: one call at a time, in arrival order. With reentrancy on, a call that
 * carries the reentrancy id of the chain holding the turn goes in at once (an actor calling
 * itself, or A → B → A), up to the type's maximum stack depth; anything else waits.
 */
import type { ReentrancyConfig } from './config.ts';

export class StackDepthError extends Error {
  constructor(max: number) {
    super(`maximum stack depth exceeded: the reentrant chain already holds ${max} calls of this actor (reentrancy.maxStackDepth)`);
    this.name = 'StackDepthError';
  }
}

/** A call waited for the actor's turn longer than the bound (a busy actor, or a cycle without reentrancy). */
export class TurnTimeoutError extends Error {
  constructor(ms: number) {
    super(`the actor's turn did not come within ${ms} ms: another call holds it (an actor that calls back into itself through another actor without reentrancy waits for itself)`);
    this.name = 'TurnTimeoutError';
  }
}

interface Holder {
  chain: string | undefined;
  depth: number;
}

export class Turns {
  private holder: Holder | undefined;
  private readonly waiting: { chain: string | undefined; go: () => void }[] = [];
  /** When the last turn ended (ms since epoch); the idle scan reads it. */
  lastUsed = Date.now();

  /** True while a call holds the turn or waits for it. */
  get busy(): boolean {
    return this.holder !== undefined || this.waiting.length > 0;
  }

  /**
   * Takes a turn; resolves to its release. Synchronous up to the wait: a caller that got the
   * activation and calls this in the same tick is counted as busy before any timer runs.
   */
  enter(chain: string | undefined, reentrancy: ReentrancyConfig, waitMs?: number): Promise<() => void> | (() => void) {
    const h = this.holder;
    if (!h) {
      this.holder = { chain, depth: 1 };
      return this.releaser();
    }
    if (reentrancy.enabled && chain !== undefined && h.chain === chain) {
      if (h.depth >= reentrancy.maxStackDepth) throw new StackDepthError(reentrancy.maxStackDepth);
      h.depth++;
      return this.releaser();
    }
    return new Promise((resolve, reject) => {
      const entry = {
        chain,
        go: () => {
          clearTimeout(timer);
          resolve(this.releaser());
        },
      };
      this.waiting.push(entry);
      // the queue forgets a call that gave up: it never runs later for a caller that is gone
      const timer =
        waitMs === undefined
          ? undefined
          : setTimeout(() => {
              const i = this.waiting.indexOf(entry);
              if (i >= 0) this.waiting.splice(i, 1);
              reject(new TurnTimeoutError(waitMs));
            }, waitMs).unref();
    });
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.leave();
    };
  }

  private leave(): void {
    const h = this.holder;
    if (!h) return;
    if (--h.depth > 0) return;
    this.lastUsed = Date.now();
    const next = this.waiting.shift();
    this.holder = next ? { chain: next.chain, depth: 1 } : undefined;
    next?.go();
  }
}
