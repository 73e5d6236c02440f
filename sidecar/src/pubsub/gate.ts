/**
 * Publishes wait for the app's own subscriptions. The sidecar answers /v1.0/healthz once its
 * APIs listen (it cannot wait for the app: a native sidecar's startup probe on that path holds
 * the app's containers until it answers), while its DECLARATIVE and PROGRAMMATIC subscriptions
 * open only once the app is reachable and has said what it subscribes to. A message published
 * in between to a component that keeps nothing for later subscribers (pubsub.in-memory) would
 * reach no one, so a publish waits until they are open: at most `limitMs` after the sidecar
 * started, so that an app that never listens, or publishes before it listens, is not held for ever.
 */
import type { Logger } from 'pino';

/** How long after the start publishes may wait for the app's subscriptions. */
export const HOLD_LIMIT_MS = 5000;

export class PublishGate {
  private opened = false;
  private told = false;
  private release: () => void = () => undefined;
  private readonly ready = new Promise<void>((r) => (this.release = r));
  private readonly timer?: NodeJS.Timeout;
  private readonly log?: Logger;

  /** Closed until open(), or `limitMs` from now (logged); without a limit, open at once. */
  constructor(limitMs?: number, log?: Logger) {
    this.log = log;
    if (limitMs === undefined) {
      this.open();
      return;
    }
    this.timer = setTimeout(() => {
      if (this.opened) return;
      log?.warn(`the app's subscriptions are not open ${limitMs} ms after the start (is the app listening?): publishes no longer wait for them`);
      this.open();
    }, limitMs);
    this.timer.unref();
  }

  get isOpen(): boolean {
    return this.opened;
  }

  /** Settles once the gate is open; the first wait is logged, so that a slow first publish is explained. */
  wait(): Promise<void> {
    if (!this.opened && !this.told) {
      this.told = true;
      this.log?.info("a publish waits until the app's subscriptions are open");
    }
    return this.ready;
  }

  open(): void {
    if (this.opened) return;
    this.opened = true;
    clearTimeout(this.timer);
    this.release();
  }
}
