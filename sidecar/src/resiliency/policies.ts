/**
 * The Resiliency resources in force for this sidecar, and the policy each target gets:
 * - a target named under `spec.targets` gets the policies it names;
 * - any kind of policy it does not name (or a target not named at all) falls back to the
 *   reference runtime's default keywords, most specific first:
 *   apps: `DefaultApp<X>Policy`, `Default<X>Policy`;
 *   components: `Default<Kind>Component<Dir><X>Policy`, `Default<Kind>Component<X>Policy`,
 *   `DefaultComponent<Dir><X>Policy`, `DefaultComponent<X>Policy`, `Default<X>Policy`
 *   (X: Retry, Timeout or CircuitBreaker; Dir: Outbound or Inbound).
 * Several resources merge in the order given; a later one's policy or target of the same name
 * replaces an earlier one's. A resource scoped to other apps does not apply.
 * Circuit breakers keep state per target: one breaker per (target, policy), kept across reloads
 * while the policy is unchanged.
 */
import { SYSTEM_CLOCK, type Clock } from '../../../shared/clock.ts';
import { CircuitBreaker, type BreakerState } from './breaker.ts';
import type { ResolvedPolicy } from './run.ts';
import type { BreakerPolicy, ResiliencySpec, RetrySettings, TargetPolicies } from './spec.ts';

export type ComponentKind = 'Statestore' | 'Pubsub' | 'Binding' | 'Secretstore' | 'Configuration' | 'Lock' | 'Crypto';
export type Direction = 'Outbound' | 'Inbound';

const KINDS: Record<string, ComponentKind> = { state: 'Statestore', pubsub: 'Pubsub', bindings: 'Binding', secretstores: 'Secretstore', configuration: 'Configuration', lock: 'Lock', crypto: 'Crypto' };

/** A component type (`state.redis`, `pubsub.mqtt3`, …) → its keyword in the default policy names. */
export function componentKind(type: string): ComponentKind | undefined {
  const dot = type.indexOf('.');
  const block = dot < 0 ? type : type.slice(0, dot);
  return Object.hasOwn(KINDS, block) ? KINDS[block] : undefined;
}

/** Targets whose resolved policy is kept (a call per request looks it up); past it the cache starts over. */
const RESOLVED_CACHE_MAX = 1024;

export class Policies {
  private readonly timeouts = new Map<string, number>();
  private readonly retries = new Map<string, RetrySettings>();
  private readonly breakerPolicies = new Map<string, BreakerPolicy>();
  private readonly apps = new Map<string, TargetPolicies>();
  private readonly components = new Map<string, { outbound?: TargetPolicies; inbound?: TargetPolicies }>();
  private readonly breakers = new Map<string, CircuitBreaker>();
  /**
   * Each target's policy once resolved (null: none): the resources do not change while this
   * object lives (a reload builds a new one), and a target's breaker is the same object each time.
   */
  private readonly resolved = new Map<string, ResolvedPolicy | null>();
  private readonly clock: Clock;
  /** Names of the resources in force. */
  readonly resources: string[] = [];

  constructor(specs: ResiliencySpec[], appId: string, clock: Clock = SYSTEM_CLOCK, previous?: Policies) {
    this.clock = clock;
    for (const s of specs) {
      if (s.scopes.length > 0 && !s.scopes.includes(appId)) continue;
      this.resources.push(s.name);
      for (const [k, v] of s.timeouts) this.timeouts.set(k, v);
      for (const [k, v] of s.retries) this.retries.set(k, v);
      for (const [k, v] of s.circuitBreakers) this.breakerPolicies.set(k, v);
      for (const [k, v] of s.apps) this.apps.set(k, v);
      for (const [k, v] of s.components) this.components.set(k, v);
    }
    // a reload keeps the state of breakers whose policy did not change
    if (previous) for (const [key, b] of previous.breakers) if (sameBreaker(this.breakerPolicies.get(b.settings.name), previous.breakerPolicies.get(b.settings.name))) this.breakers.set(key, b);
  }

  /** No policy at all: callers skip the runner. */
  get empty(): boolean {
    return this.timeouts.size === 0 && this.retries.size === 0 && this.breakerPolicies.size === 0;
  }

  /** Service invocation of `appId` (and HTTPEndpoints by name). */
  forApp(appId: string): ResolvedPolicy | undefined {
    return this.cached(`app:${appId}`, () => this.resolve(`app:${appId}`, this.apps.get(appId), ['DefaultApp', 'Default']));
  }

  /** Calls to component `name` of `type` in one direction (Outbound: the sidecar calls it; Inbound: it delivers to the app). */
  forComponent(name: string, type: string, dir: Direction): ResolvedPolicy | undefined {
    return this.cached(`component:${name}/${dir}/${type}`, () => {
      const kind = componentKind(type);
      const named = this.components.get(name)?.[dir === 'Outbound' ? 'outbound' : 'inbound'];
      const prefixes = [...(kind ? [`Default${kind}Component${dir}`, `Default${kind}Component`] : []), `DefaultComponent${dir}`, 'DefaultComponent', 'Default'];
      return this.resolve(`component:${name}/${dir.toLowerCase()}`, named, prefixes);
    });
  }

  private cached(key: string, resolve: () => ResolvedPolicy | undefined): ResolvedPolicy | undefined {
    const hit = this.resolved.get(key);
    if (hit !== undefined) return hit ?? undefined;
    const p = resolve();
    // app ids come from request paths: the cache is bounded
    if (this.resolved.size >= RESOLVED_CACHE_MAX) this.resolved.clear();
    this.resolved.set(key, p ?? null);
    return p;
  }

  /** The names of the policies in force, by kind (for /v1.0/metadata). */
  policyNames(): { timeouts: string[]; retries: string[]; circuitBreakers: string[] } {
    return { timeouts: [...this.timeouts.keys()], retries: [...this.retries.keys()], circuitBreakers: [...this.breakerPolicies.keys()] };
  }

  /** Every breaker made so far and its state (for /v1.0/metadata). */
  breakerStates(): { target: string; policy: string; state: BreakerState }[] {
    return [...this.breakers].map(([key, b]) => ({ target: key.slice(0, key.lastIndexOf('#')), policy: b.settings.name, state: b.state }));
  }

  private resolve(target: string, named: TargetPolicies | undefined, prefixes: string[]): ResolvedPolicy | undefined {
    const pick = <V>(explicit: string | undefined, known: Map<string, V>, suffix: string): [string, V] | undefined => {
      if (explicit !== undefined) return [explicit, known.get(explicit)!];
      for (const p of prefixes) {
        const v = known.get(`${p}${suffix}`);
        if (v !== undefined) return [`${p}${suffix}`, v];
      }
      return undefined;
    };
    const timeout = pick(named?.timeout, this.timeouts, 'TimeoutPolicy');
    const retry = pick(named?.retry, this.retries, 'RetryPolicy');
    const cb = pick(named?.circuitBreaker, this.breakerPolicies, 'CircuitBreakerPolicy');
    if (!timeout && !retry && !cb) return undefined;
    let breaker: CircuitBreaker | undefined;
    if (cb) {
      const key = `${target}#${cb[0]}`;
      breaker = this.breakers.get(key);
      if (!breaker) {
        breaker = new CircuitBreaker(cb[1], this.clock);
        this.breakers.set(key, breaker);
      }
    }
    return { target, timeout: timeout && { name: timeout[0], ms: timeout[1] }, retry: retry?.[1], breaker };
  }
}

function sameBreaker(a: BreakerPolicy | undefined, b: BreakerPolicy | undefined): boolean {
  return !!a && !!b && a.maxRequests === b.maxRequests && a.intervalMs === b.intervalMs && a.timeoutMs === b.timeoutMs && a.tripText === b.tripText;
}
