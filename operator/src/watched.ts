/**
 * A watched collection: a @kubernetes/client-node informer (list, then watch; it relists by itself
 * on 410 Gone) that is started again with backoff whenever its watch or list fails — an API
 * server restart, a network cut — so the operator's caches stay level with the cluster.
 */
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';

export type WatchEvent = 'add' | 'update' | 'delete';

const BACKOFF_MIN_MS = 200;
const BACKOFF_MAX_MS = 10_000;

export class Watched<T extends k8s.KubernetesObject> {
  readonly name: string;
  private readonly informer: k8s.Informer<T> & k8s.ObjectCache<T>;
  private readonly log: Logger;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private synced = false;
  private readonly syncWaiters: (() => void)[] = [];

  constructor(kc: k8s.KubeConfig, name: string, path: string, list: () => Promise<unknown>, log: Logger, onEvent: (type: WatchEvent, obj: T) => void) {
    this.name = name;
    this.log = log;
    this.informer = k8s.makeInformer<T>(kc, path, list as k8s.ListPromise<T>);
    this.informer.on('add', (o) => onEvent('add', o));
    this.informer.on('update', (o) => onEvent('update', o));
    this.informer.on('delete', (o) => onEvent('delete', o));
    this.informer.on('connect', () => {
      if (this.failures > 0) this.log.info(`watch of ${name} resumed`);
      this.failures = 0;
    });
    this.informer.on('error', (err) => this.restart(err));
  }

  async start(): Promise<void> {
    try {
      await this.informer.start();
      this.markSynced();
    } catch (e) {
      this.restart(e);
    }
  }

  /** Resolves once the first list has completed. */
  whenSynced(): Promise<void> {
    return this.synced ? Promise.resolve() : new Promise((r) => this.syncWaiters.push(r));
  }

  list(namespace?: string): readonly T[] {
    return this.informer.list(namespace);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.informer.stop();
  }

  private markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    for (const w of this.syncWaiters.splice(0)) w();
  }

  private restart(err: unknown): void {
    if (this.stopped) return;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.failures);
    this.failures++;
    const why = err instanceof Error ? err.message : String((err as { message?: string })?.message ?? err);
    this.log.warn(`watch of ${this.name} failed (${why}); starting again in ${delay} ms`);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.start(), delay);
  }
}
