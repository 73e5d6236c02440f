/**
 * A watched collection (an informer): list, then watch from the list's resourceVersion, keeping a
 * cache by namespace and name. A watch the server ends is resumed from the last resourceVersion
 * (bookmarks keep it current); 410 Gone relists, emitting deletes for objects that went away
 * meanwhile; any other failure — an API server restart, a network cut — starts again with
 * backoff, so the operator's and the injector's caches stay level with the cluster.
 * Cached objects lose what rt never reads (managedFields, kubectl's last-applied copy,
 * and whatever `trim` drops), which is most of an object's size.
 */
import type { Logger } from 'pino';
import { Backoff, wait } from '../backoff.ts';
import { ApiError, type KubeClient, type WatchEventLine } from './client.ts';

export type WatchEvent = 'add' | 'update' | 'delete';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string>; managedFields?: unknown[] };
}

/** Waits before starting again after a failure: 200 ms doubling to 10 s. */
const BACKOFF = { initialMs: 200, maxMs: 10_000 };
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** The API server sends only each object's metadata (PartialObjectMetadata): no Secret values, a fraction of the bytes. */
const METADATA_ONLY = { list: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1', watch: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1' };

export interface WatchedOptions<T> {
  labelSelector?: string;
  /** List and watch metadata only (PartialObjectMetadata): the cache holds names, versions and labels. */
  metadataOnly?: boolean;
  /** Drops the fields the caller does not read, before an object is cached. */
  trim?: (o: T) => T;
}

export class Watched<T extends KubeObject> {
  readonly name: string;
  private readonly client: KubeClient;
  private readonly path: string;
  private readonly log: Logger;
  private readonly onEvent: (type: WatchEvent, obj: T) => void;
  private readonly opts: WatchedOptions<T>;
  private cache = new Map<string, Map<string, T>>();
  private resourceVersion = '';
  private readonly backoff = new Backoff(BACKOFF);
  private stopped = false;
  private listed = false;
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly syncWaiters: (() => void)[] = [];

  constructor(client: KubeClient, name: string, path: string, log: Logger, onEvent: (type: WatchEvent, obj: T) => void, opts: WatchedOptions<T> = {}) {
    this.client = client;
    this.name = name;
    this.path = path;
    this.log = log;
    this.onEvent = onEvent;
    this.opts = opts;
  }

  /** Starts listing and watching (in the background); see whenSynced(). */
  start(): void {
    this.loop ??= this.run();
  }

  /** True once the first list has completed (the cache is then complete). */
  get synced(): boolean {
    return this.listed;
  }

  /** Resolves once the first list has completed. */
  whenSynced(): Promise<void> {
    return this.listed ? Promise.resolve() : new Promise((r) => this.syncWaiters.push(r));
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined) return [...(this.cache.get(namespace)?.values() ?? [])];
    return [...this.cache.values()].flatMap((m) => [...m.values()]);
  }

  get(name: string, namespace = ''): T | undefined {
    return this.cache.get(namespace)?.get(name);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        if (this.backoff.attempts > 0) this.log.info(`watch of ${this.name} resumed`);
        this.backoff.reset();
        // the server ends each watch after timeoutSeconds (spread, so watches do not all restart at once)
        const query = { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 240 + Math.floor(Math.random() * 120), labelSelector: this.opts.labelSelector };
        await this.client.watch<T>(this.path, query, (e) => this.onLine(e), this.abort.signal, this.opts.metadataOnly ? METADATA_ONLY.watch : undefined);
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof ApiError && e.code === 410) {
          this.log.info(`watch of ${this.name}: resourceVersion ${this.resourceVersion} expired (410 Gone): listing again`);
          this.resourceVersion = '';
          continue;
        }
        const delay = this.backoff.next();
        this.log.warn(`watch of ${this.name} failed (${(e as Error).message}); starting again in ${delay} ms`);
        await wait(delay, { signal: this.abort.signal });
      }
    }
  }

  private async relist(): Promise<void> {
    const list = await this.client.get<{ metadata?: { resourceVersion?: string }; items?: T[] }>(this.path, { labelSelector: this.opts.labelSelector }, this.opts.metadataOnly ? METADATA_ONLY.list : undefined);
    const before = this.cache;
    this.cache = new Map();
    for (const item of list.items ?? []) this.put(item);
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    for (const [ns, objs] of before) for (const [name, o] of objs) if (!this.get(name, ns)) this.onEvent('delete', o);
    for (const o of this.list()) this.onEvent(before.get(o.metadata?.namespace ?? '')?.has(o.metadata?.name ?? '') ? 'update' : 'add', o);
    if (!this.listed) {
      this.listed = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
  }

  private onLine(e: WatchEventLine<T>): void {
    if (e.type === 'ERROR') {
      // 410 Gone (or another expiry): the server closes this watch; relist before the next one
      this.log.info(`watch of ${this.name}: resourceVersion ${this.resourceVersion} expired (${(e.object as { code?: number }).code ?? 'error'} in the stream): listing again`);
      this.resourceVersion = '';
      return;
    }
    this.resourceVersion = e.object.metadata?.resourceVersion ?? this.resourceVersion;
    if (e.type === 'BOOKMARK') return;
    const ns = e.object.metadata?.namespace ?? '';
    const name = e.object.metadata?.name ?? '';
    if (e.type === 'DELETED') {
      const had = this.get(name, ns);
      this.cache.get(ns)?.delete(name);
      if (this.cache.get(ns)?.size === 0) this.cache.delete(ns);
      this.onEvent('delete', had ?? e.object);
      return;
    }
    const had = this.get(name, ns) !== undefined;
    this.onEvent(had ? 'update' : 'add', this.put(e.object));
  }

  private put(raw: T): T {
    const o = this.opts.trim ? this.opts.trim(raw) : raw;
    const md = o.metadata ?? {};
    delete md.managedFields;
    if (md.annotations?.[LAST_APPLIED] !== undefined) delete md.annotations[LAST_APPLIED];
    const ns = md.namespace ?? '';
    let m = this.cache.get(ns);
    if (!m) this.cache.set(ns, (m = new Map()));
    m.set(md.name ?? '', o);
    return o;
  }
}
