/**
 * The configuration building block for both API surfaces: finds the store (400 listing the
 * loaded ones when unknown), reads items, and keeps the active subscriptions. A subscription
 * gets its id here (a random UUID, as the reference's) and lives until it is unsubscribed (by
 * either API), its owner goes away (a gRPC stream ends), its component is removed or replaced
 * (a hot reload: the client subscribes again, to the new one), or the sidecar stops. Its changes
 * go to the sink its API gave: POSTs to the app (delivery.ts) or the gRPC stream.
 * Reading items and starting a subscription run under the store's outbound resiliency policy
 * when one applies (componentCall); the changes a subscription hands on do not.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ERRORS, fail } from '../api/errors.ts';
import { ComponentCatalog } from '../components/catalog.ts';
import { ConfigurationRequestError, type ConfigurationItems, type ConfigurationStore, type ConfigurationWatch } from '../components/configuration/types.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import { ApiError, errorMessage, malformed } from '../http/errors.ts';
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';

export interface ConfigurationRequest {
  store: string;
  /** Empty: every key. */
  keys: string[];
  metadata: Record<string, string>;
}

/** Where a subscription's changes go: one call per change of one key, awaited before that key's next. */
export type ConfigurationSink = (id: string, items: ConfigurationItems) => Promise<void>;

interface Active {
  store: string;
  /** The component instance it listens on (a replaced one ends its subscriptions). */
  instance: ConfigurationStore;
  watch: ConfigurationWatch;
  /** Told once the subscription has stopped, whoever stopped it. */
  ended: () => void;
}

export class ConfigurationService {
  private readonly components: ComponentRegistry;
  private readonly log: Logger;
  private readonly active = new Map<string, Active>();
  private readonly resiliency?: ResiliencyService;

  constructor(components: ComponentRegistry, log: Logger, resiliency?: ResiliencyService) {
    this.components = components;
    this.log = log;
    this.resiliency = resiliency;
    components.onChange((event, c) => {
      if (event !== 'removed' || ComponentCatalog.categoryOf(c.spec.type) !== 'configuration') return;
      for (const [id, a] of this.active) if (a.instance === c.instance) void this.stop(id, a);
    });
  }

  /** Throws the 400 when no configuration store of that name is loaded. */
  requireStore(name: string): void {
    this.store(name);
  }

  private store(name: string): ConfigurationStore {
    const c = name ? this.components.get(name) : undefined;
    if (!c || ComponentCatalog.categoryOf(c.spec.type) !== 'configuration') {
      const loaded = this.components.namesOf('configuration');
      throw fail(ERRORS.CONFIGURATION_STORE_NOT_FOUND, `configuration store "${name.slice(0, 80)}" is not found; loaded configuration stores: ${loaded.join(', ') || 'none'}${this.components.notLoadedNote(name)}`);
    }
    return c.instance as ConfigurationStore;
  }

  /** The store's items of the keys (all of them when none is named); keys without an item are left out. */
  async get(req: ConfigurationRequest): Promise<ConfigurationItems> {
    const store = this.store(req.store);
    checkKeys(req.keys);
    try {
      return await this.underPolicy(req.store, () => store.get(req.keys, req.metadata));
    } catch (e) {
      throw e instanceof ApiError ? e : fail(ERRORS.CONFIGURATION_GET_FAILED, `failed to get ${keyList(req.keys)} from configuration store ${req.store}: ${errorMessage(e)}`);
    }
  }

  /**
   * Starts a subscription; resolves with its id once the store listens, so that every change made
   * after that reaches `sink`. `ended` runs when it stops for any reason.
   */
  async subscribe(req: ConfigurationRequest, sink: ConfigurationSink, ended: () => void = () => undefined): Promise<string> {
    const store = this.store(req.store);
    checkKeys(req.keys);
    const id = randomUUID();
    let watch: ConfigurationWatch;
    try {
      const onChange = async (items: ConfigurationItems) => {
        try {
          await sink(id, items);
        } catch (e) {
          this.log.warn({ store: req.store, subscription: id, err: errorMessage(e) }, 'could not hand a configuration change on');
        }
      };
      watch = await this.underPolicy(req.store, (signal) =>
        store.subscribe({ keys: [...new Set(req.keys)], metadata: req.metadata }, onChange).then((w) => {
          // a try the policy gave up on (its timeout) that starts listening later is stopped: nobody holds its id
          if (!signal?.aborted) return w;
          void w.stop().catch(() => undefined);
          throw signal.reason;
        }),
      );
    } catch (e) {
      if (e instanceof ApiError) throw e;
      const message = `failed to subscribe ${keyList(req.keys)} from configuration store ${req.store}: ${errorMessage(e)}`;
      throw fail(e instanceof ConfigurationRequestError ? ERRORS.CONFIGURATION_SUBSCRIBE_INVALID : ERRORS.CONFIGURATION_SUBSCRIBE_FAILED, message);
    }
    this.active.set(id, { store: req.store, instance: store, watch, ended });
    return id;
  }

  /** Stops a subscription; with `store`, the id must be one of that store's (the HTTP path names both). */
  async unsubscribe(id: string, store?: string): Promise<void> {
    if (store !== undefined) this.store(store);
    const a = this.active.get(id);
    if (!a || (store !== undefined && a.store !== store)) {
      throw fail(ERRORS.CONFIGURATION_SUBSCRIPTION_NOT_FOUND, `failed to unsubscribe to configuration request ${id.slice(0, 80)}: subscription does not exist${store !== undefined ? ` on configuration store ${store}` : ''}`);
    }
    await this.stop(id, a);
  }

  /** Stops a subscription when it is active (its owner went away); no error otherwise. */
  async end(id: string): Promise<void> {
    const a = this.active.get(id);
    if (a) await this.stop(id, a);
  }

  /** The active subscriptions' ids (tests, shutdown). */
  ids(): string[] {
    return [...this.active.keys()];
  }

  /** Stops every subscription (sidecar shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.active].map(([id, a]) => this.stop(id, a)));
  }

  /** A call to store `name` under its outbound policy; a request the store refused is the caller's (not retried). */
  private underPolicy<T>(name: string, call: (signal?: AbortSignal) => Promise<T>): Promise<T> {
    return componentCall(this.resiliency, this.components, name, 'Outbound', call, { isRequestError: (e) => e instanceof ApiError || e instanceof ConfigurationRequestError });
  }

  private async stop(id: string, a: Active): Promise<void> {
    this.active.delete(id);
    try {
      await a.watch.stop();
    } catch (e) {
      this.log.debug({ store: a.store, subscription: id, err: errorMessage(e) }, 'configuration watch did not stop cleanly');
    } finally {
      a.ended();
    }
  }
}

function checkKeys(keys: string[]): void {
  if (keys.some((k) => k === '')) throw malformed('a configuration key must not be empty');
}

function keyList(keys: string[]): string {
  return keys.length ? `[${keys.slice(0, 20).join(' ')}${keys.length > 20 ? ' …' : ''}]` : 'all keys';
}
