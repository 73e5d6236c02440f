/**
 * Applies a desired state (from any ResourceSource) to a running sidecar: diffs the components
 * against what is loaded and adds, updates or removes only those that changed — secret stores
 * first, with the same secret resolution as at start — and swaps subscriptions, HTTP endpoints
 * and feature flags in the metadata. One desired state is applied at a time; a newer one that
 * arrives meanwhile replaces any still waiting (level-triggered: only the latest matters).
 */
import type { Logger } from 'pino';
import type { ComponentRegistry } from '../components/registry.ts';
import type { MetadataService } from '../metadata/service.ts';
import { resolveSecrets } from './secrets.ts';
import type { RawComponent, Resources } from './types.ts';

export interface ApplyResult {
  added: string[];
  updated: string[];
  removed: string[];
  /** Components that could not be applied, with the reason (the previous instance stays). */
  failed: { name: string; reason: string }[];
}

export class ResourceApplier {
  /** name → fingerprint of the raw component that is loaded. */
  private readonly loaded = new Map<string, string>();
  /** Components a building block cannot let go of while it runs: name → why, and who to tell. */
  private readonly held = new Map<string, { why: string; onRefused?: (message: string | undefined) => void }>();
  /** Changes refused because of a hold, for /v1.0/healthz/outbound: name → message. */
  private readonly refused = new Map<string, string>();
  private waiting: Resources | undefined;
  private running: Promise<void> | undefined;

  private readonly registry: ComponentRegistry;
  private readonly metadata: MetadataService;
  /** The sidecar's shared Resources object: kept equal to what is applied. */
  private readonly resources: Resources;
  private readonly log: Logger;
  /** The secret store secretKeyRefs use when auth.secretStore is absent (kubernetes mode). */
  private readonly defaultSecretStore?: string;

  constructor(registry: ComponentRegistry, metadata: MetadataService, resources: Resources, log: Logger, defaultSecretStore?: string) {
    this.registry = registry;
    this.metadata = metadata;
    this.resources = resources;
    this.log = log;
    this.defaultSecretStore = defaultSecretStore;
  }

  /**
   * Components the source withheld (the operator found them invalid): never loaded, so one bad
   * Component does not stop this sidecar; reported in the metadata and in not-found answers, and
   * logged once per reason. One that was loaded before it turned invalid is unloaded below, as
   * it is no longer wanted.
   */
  private withhold(list: NonNullable<Resources['withheld']>): void {
    const before = this.registry.notLoaded();
    this.registry.setNotLoaded(list);
    for (const w of list) {
      if (before.find((b) => b.name === w.name)?.reason === w.reason) continue;
      this.log.warn({ component: w.name, type: w.type }, `component not loaded: the operator withheld it: ${w.reason}`);
    }
  }

  /** Applies now; with strict, the first component that fails (and does not ignore errors) throws. */
  async apply(desired: Resources, strict = false): Promise<ApplyResult> {
    const result: ApplyResult = { added: [], updated: [], removed: [], failed: [] };
    this.resources.configuration = desired.configuration;
    this.resources.subscriptions = desired.subscriptions;
    this.resources.httpEndpoints = desired.httpEndpoints;
    this.resources.components = desired.components;
    // read by the resiliency block at its next call (it rebuilds its policies when this changes)
    this.resources.resiliencies = desired.resiliencies;
    this.metadata.setFeatures(desired.configuration?.features ?? []);
    this.metadata.setHttpEndpoints(desired.httpEndpoints);
    this.withhold(desired.withheld ?? []);

    const wanted = new Map(desired.components.map((c) => [c.spec.name, c]));
    for (const name of [...this.loaded.keys()].filter((n) => !wanted.has(n)).sort()) {
      if (this.refuse(name, 'removal', result)) continue;
      await this.registry.remove(name);
      this.loaded.delete(name);
      result.removed.push(name);
    }
    const changedStores = new Set<string>();
    const ordered = [...desired.components].sort((a, b) => rank(a) - rank(b));
    for (const raw of ordered) {
      const fp = fingerprint(raw);
      const had = this.loaded.get(raw.spec.name);
      const storeChanged = raw.secretRefs.length > 0 && changedStores.has(raw.secretStore ?? this.defaultSecretStore ?? '');
      if (had === fp && !storeChanged) {
        // a refused change was taken back
        if (this.refused.delete(raw.spec.name)) this.held.get(raw.spec.name)?.onRefused?.(undefined);
        continue;
      }
      if (had !== undefined && this.refuse(raw.spec.name, 'change', result)) continue;
      try {
        const spec = await resolveSecrets(raw, this.registry, this.defaultSecretStore);
        const entry = await this.registry.apply(spec);
        if (!entry) continue; // ignoreErrors: logged by the registry
        this.loaded.set(raw.spec.name, fp);
        if (raw.spec.type.startsWith('secretstores.')) changedStores.add(raw.spec.name);
        (had === undefined ? result.added : result.updated).push(raw.spec.name);
      } catch (e) {
        if (raw.spec.ignoreErrors) {
          this.log.warn({ component: raw.spec.name }, `${(e as Error).message} (ignored: ignoreErrors is true)`);
          continue;
        }
        if (strict) throw e;
        result.failed.push({ name: raw.spec.name, reason: (e as Error).message });
        this.log.error({ component: raw.spec.name }, `component not applied${had ? ', the previous version keeps running' : ''}: ${(e as Error).message}`);
      }
    }
    if (result.added.length + result.updated.length + result.removed.length > 0) this.log.info(result, 'resources applied');
    return result;
  }

  /**
   * Keeps `name` as it is loaded now: a later change or removal of it is refused — logged, in the
   * result's `failed`, in problems() — until the sidecar restarts (see docs/workflows.md).
   * `onRefused` hears each refusal, and undefined when the desired state is back to the loaded one.
   */
  hold(name: string, why: string, onRefused?: (message: string | undefined) => void): void {
    this.held.set(name, { why, onRefused });
  }

  /** Refused changes, as /v1.0/healthz/outbound lists them. */
  problems(): { name: string; reason: string }[] {
    return [...this.refused].map(([name, reason]) => ({ name, reason }));
  }

  private refuse(name: string, what: 'change' | 'removal', result: ApplyResult): boolean {
    const hold = this.held.get(name);
    if (!hold) return false;
    const reason = `${what} of component ${name} refused: ${hold.why}; the loaded version keeps working`;
    if (this.refused.get(name) !== reason) {
      this.log.error({ component: name }, reason);
      hold.onRefused?.(reason);
    }
    this.refused.set(name, reason);
    result.failed.push({ name, reason });
    return true;
  }

  /** Queues a desired state from a watch; returns when it (or a newer one) has been applied. */
  submit(desired: Resources): Promise<void> {
    this.waiting = desired;
    this.running ??= (async () => {
      while (this.waiting) {
        const next = this.waiting;
        this.waiting = undefined;
        await this.apply(next).catch((e: Error) => this.log.error(`applying resources failed: ${e.message}`));
      }
      this.running = undefined;
    })();
    return this.running;
  }

  /** Resolves once nothing is waiting or being applied. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }
}

function rank(c: RawComponent): number {
  return c.spec.type.startsWith('secretstores.') ? 0 : 1;
}

/** What decides whether a component changed: its spec (less where it came from) and its secret refs. */
function fingerprint(c: RawComponent): string {
  const { source: _source, ...spec } = c.spec;
  return JSON.stringify([spec, c.secretRefs, c.secretStore ?? null]);
}
