/**
 * The loaded components of this sidecar. A resource source (files now, the operator's stream
 * on a cluster) calls apply()/remove(); building blocks look components up by name.
 */
import type { Logger } from 'pino';
import { ComponentCatalog } from './catalog.ts';
import { decodeMetadata } from './metadata/decode.ts';
import { STATE_STORE_METADATA } from './state/metadata.ts';
import type {
  Component,
  ComponentContext,
  ComponentSpec,
  InputBinding,
  OutputBinding,
  SecretStore,
  StateStore,
} from './types.ts';

export interface LoadedComponent {
  spec: ComponentSpec;
  instance: Component;
}

export interface ComponentInfo {
  name: string;
  type: string;
  version: string;
  capabilities: string[];
}

/** A component failed to load; names the component, its source and the cause. */
export class ComponentInitError extends Error {
  readonly component: string;
  constructor(spec: ComponentSpec, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`component "${spec.name}" (${spec.type}/${spec.version}, from ${spec.source}) failed to initialise: ${why}`, { cause });
    this.name = 'ComponentInitError';
    this.component = spec.name;
  }
}

type Listener = (event: 'added' | 'removed', c: LoadedComponent) => void;

/** How long a replaced component may finish the calls it is serving before it is closed anyway. */
const DRAIN_MS = 10_000;

interface Tracking {
  inFlight: number;
  idle: (() => void)[];
  raw: Component;
}
const tracking = new WeakMap<object, Tracking>();

/**
 * Wraps an instance so the registry knows how many of its async calls are running: a swap closes
 * the old instance only when they are done. Methods run with the real instance as `this`.
 */
function tracked(raw: Component): Component {
  const t: Tracking = { inFlight: 0, idle: [], raw };
  const wrapped = new Map<PropertyKey, unknown>();
  const proxy = new Proxy(raw, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function' || prop === 'close' || prop === 'init' || prop === 'constructor') return v;
      let w = wrapped.get(prop);
      if (!w) {
        const fn = v as (...a: unknown[]) => unknown;
        w = (...args: unknown[]) => {
          const r = fn.apply(target, args);
          if (!(r instanceof Promise)) return r;
          t.inFlight++;
          return r.finally(() => {
            if (--t.inFlight === 0) for (const f of t.idle.splice(0)) f();
          });
        };
        wrapped.set(prop, w);
      }
      return w;
    },
  });
  tracking.set(proxy, t);
  return proxy;
}

function untracked(c: Component): Component {
  return tracking.get(c)?.raw ?? c;
}

async function drained(c: Component, maxMs: number): Promise<void> {
  const t = tracking.get(c);
  if (!t || t.inFlight === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([new Promise<void>((r) => t.idle.push(r)), new Promise<void>((r) => (timer = setTimeout(r, maxMs)))]);
  clearTimeout(timer);
}

export class ComponentRegistry {
  private readonly loaded = new Map<string, LoadedComponent>();
  /** Components the resource source withheld, with why (see ResourceApplier.withhold). */
  private withheld: { name: string; type: string; reason: string }[] = [];
  private readonly listeners: Listener[] = [];
  private readonly queues = new Map<string, Promise<void>>();
  private readonly retiring = new Set<Promise<void>>();
  private readonly typeResolvers: ((type: string) => void)[] = [];
  readonly catalog: ComponentCatalog;
  private readonly ctx: ComponentContext;
  private readonly log: Logger;

  constructor(catalog: ComponentCatalog, ctx: ComponentContext) {
    this.catalog = catalog;
    this.ctx = ctx;
    this.log = ctx.log;
  }

  onChange(l: Listener): void {
    this.listeners.push(l);
  }

  /**
   * Creates and initialises a component, replacing one of the same name (hot update): the new
   * instance is opened first, then swapped in, then the old one is closed once the calls it is
   * serving have finished (at most DRAIN_MS), so no request fails because of a swap. Calls for one
   * name run one after another. Throws ComponentInitError unless the spec sets ignoreErrors (then
   * logs and skips); a failed update leaves the previous instance in place.
   */
  apply(spec: ComponentSpec): Promise<LoadedComponent | undefined> {
    return this.serial(spec.name, () => this.applyNow(spec));
  }

  private async applyNow(spec: ComponentSpec): Promise<LoadedComponent | undefined> {
    try {
      const raw = await this.create(spec);
      const entry = { spec, instance: tracked(raw) };
      const previous = this.loaded.get(spec.name);
      this.loaded.set(spec.name, entry);
      if (previous) {
        this.emit('removed', previous);
        this.retire(previous);
      }
      this.emit('added', entry);
      this.log.info({ component: spec.name, type: spec.type, version: spec.version }, previous ? 'component updated' : 'component loaded');
      return entry;
    } catch (err) {
      const e = err instanceof ComponentInitError ? err : new ComponentInitError(spec, err);
      if (spec.ignoreErrors) {
        this.log.warn({ component: spec.name }, `${e.message} (ignored: ignoreErrors is true)`);
        return undefined;
      }
      throw e;
    }
  }

  /** Runs fn after every earlier apply/remove of the same name has settled. */
  private serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(name) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(name, settled);
    void settled.then(() => {
      if (this.queues.get(name) === settled) this.queues.delete(name);
    });
    return next;
  }

  /** Closes a replaced or removed instance once its in-flight calls are done. */
  private retire(c: LoadedComponent): void {
    const done = (async () => {
      await drained(c.instance, DRAIN_MS);
      await untracked(c.instance)
        .close()
        .catch((e) => this.log.warn({ err: e, component: c.spec.name }, 'closing replaced component failed'));
    })();
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }

  /** Called with a type the catalog does not know, before create() gives up (pluggable discovery). */
  onUnknownType(fn: (type: string) => void): void {
    this.typeResolvers.push(fn);
  }

  private async create(spec: ComponentSpec): Promise<Component> {
    if (!this.catalog.has(spec.type)) for (const r of this.typeResolvers) r(spec.type);
    const info = this.catalog.get(spec.type);
    if (!info) {
      throw new ComponentInitError(spec, new Error(`unknown component type "${spec.type}"; known types: ${this.catalog.list().join(', ')}`));
    }
    const versions = info.versions ?? ['v1'];
    if (!versions.includes(spec.version)) {
      throw new ComponentInitError(spec, new Error(`version "${spec.version}" is not supported by ${spec.type}; supported: ${versions.join(', ')}`));
    }
    // the runtime's own fields are checked before the component reads its own
    if (ComponentCatalog.categoryOf(spec.type) === 'state') decodeMetadata(STATE_STORE_METADATA, spec.metadata);
    const factory = await info.load();
    const instance = factory();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`init did not finish within initTimeout (${spec.initTimeoutMs} ms)`)), spec.initTimeoutMs);
    });
    try {
      await Promise.race([instance.init(spec, this.ctx), timeout]);
    } catch (err) {
      await instance.close().catch(() => undefined);
      throw new ComponentInitError(spec, err);
    } finally {
      clearTimeout(timer);
    }
    return instance;
  }

  /** Unloads a component; it is closed once the calls it is serving have finished. */
  remove(name: string): Promise<void> {
    return this.serial(name, async () => {
      const c = this.loaded.get(name);
      if (!c) return;
      this.loaded.delete(name);
      this.emit('removed', c);
      this.log.info({ component: name }, 'component removed');
      this.retire(c);
    });
  }

  get(name: string): LoadedComponent | undefined {
    return this.loaded.get(name);
  }

  all(): LoadedComponent[] {
    return [...this.loaded.values()];
  }

  /** Names of loaded components of one category (for "loaded ones are …" messages). */
  namesOf(category: string): string[] {
    return this.all().filter((c) => ComponentCatalog.categoryOf(c.spec.type) === category).map((c) => c.spec.name).sort();
  }

  stateStore(name: string): StateStore | undefined {
    const c = this.loaded.get(name);
    return c && ComponentCatalog.categoryOf(c.spec.type) === 'state' ? (c.instance as StateStore) : undefined;
  }

  outputBinding(name: string): OutputBinding | undefined {
    const c = this.loaded.get(name);
    if (!c || ComponentCatalog.categoryOf(c.spec.type) !== 'bindings') return undefined;
    const i = c.instance as Partial<OutputBinding>;
    return typeof i.invoke === 'function' ? (c.instance as OutputBinding) : undefined;
  }

  /**
   * Bindings that take events in: they have start(), and, when they tell their capabilities (an
   * event-routing or pluggable binding configured for one direction), INPUT_BINDING among them.
   */
  inputBindings(): { name: string; binding: InputBinding }[] {
    const isInput = (i: Partial<InputBinding> & { capabilities?: () => string[] }) =>
      typeof i.start === 'function' && (typeof i.capabilities !== 'function' || i.capabilities().includes('INPUT_BINDING'));
    return this.all()
      .filter((c) => ComponentCatalog.categoryOf(c.spec.type) === 'bindings' && isInput(c.instance as Partial<InputBinding>))
      .map((c) => ({ name: c.spec.name, binding: c.instance as InputBinding }));
  }

  secretStore(name: string): SecretStore | undefined {
    const c = this.loaded.get(name);
    return c && ComponentCatalog.categoryOf(c.spec.type) === 'secretstores' ? (c.instance as SecretStore) : undefined;
  }

  /** The state store flagged `actorStateStore: "true"` (a boolean, checked when it loaded), if any. */
  actorStateStore(): { name: string; store: StateStore } | undefined {
    const c = this.all().find((x) => ComponentCatalog.categoryOf(x.spec.type) === 'state' && decodeMetadata(STATE_STORE_METADATA, x.spec.metadata).actorStateStore);
    return c ? { name: c.spec.name, store: c.instance as StateStore } : undefined;
  }

  setNotLoaded(list: { name: string; type: string; reason: string }[]): void {
    this.withheld = list.map((w) => ({ ...w }));
  }

  /** Components in scope that are not loaded, and why (for the metadata). */
  notLoaded(): { name: string; type: string; reason: string }[] {
    return this.withheld.map((w) => ({ ...w }));
  }

  /** For a not-found answer: why `name` is not loaded, when the source said so ('' otherwise). */
  notLoadedNote(name: string): string {
    const w = this.withheld.find((x) => x.name === name);
    return w ? `; "${w.name}" (${w.type}) was not loaded: ${w.reason}` : '';
  }

  info(): ComponentInfo[] {
    return this.all().map((c) => ({
      name: c.spec.name,
      type: c.spec.type,
      version: c.spec.version,
      capabilities: c.instance.capabilities(),
    }));
  }

  /**
   * Pings every component that can be pinged (within timeoutMs each, all at once) and returns
   * the ones that failed, for /v1.0/healthz/outbound.
   */
  async unhealthy(timeoutMs = 2000): Promise<{ name: string; reason: string }[]> {
    const checks = this.all()
      .filter((c) => typeof c.instance.ping === 'function')
      .map(async (c) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            c.instance.ping!(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
          return undefined;
        } catch (e) {
          return { name: c.spec.name, reason: e instanceof Error ? e.message : String(e) };
        } finally {
          clearTimeout(timer);
        }
      });
    return (await Promise.all(checks)).filter((x): x is { name: string; reason: string } => x !== undefined);
  }

  async closeAll(): Promise<void> {
    const all = this.all();
    this.loaded.clear();
    await Promise.allSettled([...all.map((c) => untracked(c.instance).close()), ...this.retiring]);
  }

  private emit(event: 'added' | 'removed', c: LoadedComponent): void {
    for (const l of this.listeners) l(event, c);
  }
}
