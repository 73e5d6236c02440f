/**
 * Where the injector finds Components: an informer cache of `components.rt.io` in every
 * namespace, so the admission path never calls the API server (the answer must come well inside
 * the webhook timeout, and a LIST per pod does not scale); and of `components.dapr.io` where
 * that CRD is installed, as the operator serves both (an rt.io Component wins over a dapr.io one
 * of the same name).
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Backoff } from '../../shared/backoff.ts';

export interface ComponentObject extends KubernetesObject {
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string>; resourceVersion?: string };
  spec?: { type?: string };
  scopes?: string[];
}

export interface ComponentLister {
  /** The Components of one namespace, as last seen. */
  list(namespace: string): ComponentObject[];
  /** False until the first full list arrived (then the answers are complete). */
  readonly synced: boolean;
}

/** A fixed set of Components: for a webhook without cluster access, and for the tests' fixtures. */
export class StaticComponents implements ComponentLister {
  readonly synced = true;
  private readonly objects: ComponentObject[];
  constructor(objects: ComponentObject[] = []) {
    this.objects = objects;
  }
  list(namespace: string): ComponentObject[] {
    return this.objects.filter((o) => o.metadata?.namespace === namespace);
  }
}

/** The Component API groups, first wins for one name (the operator's order). */
export const COMPONENT_GROUPS = ['rt.io', 'dapr.io'] as const;
type Group = (typeof COMPONENT_GROUPS)[number];
const VERSION = 'v1alpha1';
const PLURAL = 'components';

/** Several groups' caches as one: synced when all are; a name in an earlier group hides a later one's. */
export class MergedComponents implements ComponentLister {
  private readonly sources: ComponentLister[];
  constructor(sources: ComponentLister[]) {
    this.sources = sources;
  }
  get synced(): boolean {
    return this.sources.every((s) => s.synced);
  }
  list(namespace: string): ComponentObject[] {
    const seen = new Set<string>();
    const out: ComponentObject[] = [];
    for (const s of this.sources) {
      for (const o of s.list(namespace)) {
        const name = o.metadata?.name ?? '';
        if (seen.has(name)) continue;
        seen.add(name);
        out.push(o);
      }
    }
    return out;
  }
}

/** Whether the cluster serves `components.<group>` (a 404 means its CRD is not installed). */
export async function groupServed(kc: KubeConfig, group: Group): Promise<boolean> {
  const k8s = await import('@kubernetes/client-node');
  const api = kc.makeApiClient(k8s.CustomObjectsApi);
  try {
    await api.listClusterCustomObject({ group, version: VERSION, plural: PLURAL, limit: 1 });
    return true;
  } catch (e) {
    if ((e as { code?: number }).code === 404) return false;
    throw e;
  }
}
/** Waits before restarting a failed informer: 500 ms doubling to 30 s. */
const RESTART_BACKOFF = { initialMs: 500, maxMs: 30_000 };

/**
 * client-node's informer lists, then watches; on an error other than 410 it stops, so it is
 * restarted here with capped backoff. Its cache is the answer to list().
 */
export class ComponentInformer implements ComponentLister {
  private informer?: Awaited<ReturnType<typeof makeComponentInformer>>;
  private synced_ = false;
  private stopped = false;
  private readonly backoff = new Backoff(RESTART_BACKOFF);
  private timer?: NodeJS.Timeout;
  private errors = 0;
  private readonly kc: KubeConfig;
  private readonly log: Logger;
  readonly group: Group;

  constructor(kc: KubeConfig, log: Logger, group: Group = 'rt.io') {
    this.kc = kc;
    this.log = log;
    this.group = group;
  }

  get synced(): boolean {
    return this.synced_;
  }

  /** Resolves after the first list (the cache is then complete); keeps retrying in the background. */
  async start(): Promise<void> {
    this.informer = await makeComponentInformer(this.kc, this.group);
    this.informer.on('error', (err: unknown) => this.retryLater(err));
    await this.restart();
  }

  private retryLater(err: unknown): void {
    this.errors++;
    if (this.stopped || this.timer) return;
    const wait = this.backoff.next();
    this.log.warn({ err: describe(err) }, `list/watch of components.${this.group} failed; retrying in ${wait} ms`);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.restart();
    }, wait);
  }

  private async restart(): Promise<void> {
    if (this.stopped || !this.informer) return;
    const before = this.errors;
    try {
      // start() reports a failed list through 'error' and resolves anyway
      await this.informer.start();
      if (this.errors === before) {
        this.synced_ = true;
        this.backoff.reset();
      }
    } catch (e) {
      this.retryLater(e);
    }
  }

  list(namespace: string): ComponentObject[] {
    return [...(this.informer?.list(namespace) ?? [])];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.informer?.stop().catch(() => undefined);
  }
}

async function makeComponentInformer(kc: KubeConfig, group: Group) {
  const k8s = await import('@kubernetes/client-node');
  const api = kc.makeApiClient(k8s.CustomObjectsApi);
  const listFn = () =>
    api.listClusterCustomObject({ group, version: VERSION, plural: PLURAL }) as Promise<{ items: ComponentObject[]; metadata?: { resourceVersion?: string } }> as never;
  return k8s.makeInformer<ComponentObject>(kc, `/apis/${group}/${VERSION}/${PLURAL}`, listFn);
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (err && typeof err === 'object' && 'message' in err) return String((err as { message: unknown }).message);
  return String(err);
}
