/**
 * Where the injector finds Components: an informer cache of `components.rt.io` in every
 * namespace, so the admission path never calls the API server (the answer must come well inside
 * the webhook timeout, and a LIST per pod does not scale); and of `components.dapr.io` where
 * that CRD is installed, as the operator serves both (an rt.io Component wins over a dapr.io one
 * of the same name).
 */
import type { Logger } from 'pino';
import { ApiError, type KubeClient } from '../../shared/kube/client.ts';
import { Watched, type KubeObject } from '../../shared/kube/watched.ts';

export interface ComponentObject extends KubeObject {
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
export async function groupServed(client: KubeClient, group: Group): Promise<boolean> {
  try {
    await client.get(`/apis/${group}/${VERSION}/${PLURAL}`, { limit: 1 });
    return true;
  } catch (e) {
    if (e instanceof ApiError && e.code === 404) return false;
    throw e;
  }
}

/**
 * The Components of one group in every namespace, as the operator's caches hold its kinds
 * (shared/kube/watched.ts: list, then watch from the list's resourceVersion; 410 relists; any
 * other failure, such as the CRD not installed yet, starts again with backoff).
 */
export class ComponentInformer implements ComponentLister {
  private readonly watched: Watched<ComponentObject>;
  readonly group: Group;

  constructor(client: KubeClient, log: Logger, group: Group = 'rt.io') {
    this.group = group;
    // the admission path reads the cache; nothing happens on a change
    this.watched = new Watched<ComponentObject>(client, `${PLURAL}.${group}`, `/apis/${group}/${VERSION}/${PLURAL}`, log, () => undefined);
  }

  get synced(): boolean {
    return this.watched.synced;
  }

  /** Resolves after the first list (the cache is then complete); keeps retrying in the background. */
  start(): Promise<void> {
    this.watched.start();
    return this.watched.whenSynced();
  }

  list(namespace: string): ComponentObject[] {
    return this.watched.list(namespace);
  }

  stop(): Promise<void> {
    return this.watched.stop();
  }
}
