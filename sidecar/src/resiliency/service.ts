/**
 * The resiliency policies of a running sidecar: built from the Resiliency resources in the
 * sidecar's shared Resources object, rebuilt when a reload swaps them (circuit breakers keep their
 * state while their policy is unchanged), and counted: every try's outcome by policy and target,
 * for the metrics (`rt_resiliency_*`) and /v1.0/metadata.
 */
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import type { Resources } from '../resources/types.ts';
import { SYSTEM_CLOCK, type Clock } from '../../../shared/clock.ts';
import { Policies, type Direction } from './policies.ts';
import { runPolicy, type Outcome, type ResolvedPolicy, type RunOptions } from './run.ts';
import type { ResiliencySpec } from './spec.ts';
import type { TracingService } from '../tracing/service.ts';

export interface PolicyCount {
  target: string;
  /** The retry, timeout or circuit breaker policy the outcome is about ('' when the target has none of that kind). */
  policy: string;
  outcome: Outcome;
  count: number;
}

/** What /v1.0/metadata shows of the policies (rt's own field, `resiliency`; docs/resiliency.md). */
export interface ResiliencyMetadata {
  /** The Resiliency resources in force. */
  resources: string[];
  policies: ReturnType<Policies['policyNames']>;
  /** Each breaker made so far (one per target and policy, made at its target's first call) and its state now. */
  circuitBreakers: ReturnType<Policies['breakerStates']>;
  /** Every try counted so far, as the metrics count them. */
  outcomes: PolicyCount[];
}

export class ResiliencyService {
  private readonly resources: Resources;
  private readonly appId: string;
  private readonly clock: Clock;
  private readonly log: Logger;
  private seen: ResiliencySpec[] | undefined;
  private policies: Policies;
  private readonly counts = new Map<string, PolicyCount>();
  /** Each resolved policy's counters by outcome (the entries of `counts`): no key to build per call. */
  private readonly countsOf = new WeakMap<ResolvedPolicy, Partial<Record<Outcome, PolicyCount>>>();
  /** Each resolved policy's observe callback, made once. */
  private readonly observers = new WeakMap<ResolvedPolicy, (outcome: Outcome) => void>();
  /** Set by the resiliency block while tracing is on: component calls get CLIENT spans (tracing/components.ts). */
  tracing?: TracingService;

  constructor(resources: Resources, appId: string, log: Logger, clock: Clock = SYSTEM_CLOCK) {
    this.resources = resources;
    this.appId = appId;
    this.log = log;
    this.clock = clock;
    this.seen = resources.resiliencies;
    this.policies = new Policies(this.seen ?? [], appId, clock);
    if (this.policies.resources.length) log.info({ resiliency: this.policies.resources }, 'resiliency policies loaded');
  }

  /** The policies now (rebuilt when a reload swapped the resources). */
  get current(): Policies {
    if (this.resources.resiliencies !== this.seen) {
      this.seen = this.resources.resiliencies;
      this.policies = new Policies(this.seen ?? [], this.appId, this.clock, this.policies);
      this.log.info({ resiliency: this.policies.resources }, 'resiliency policies reloaded');
    }
    return this.policies;
  }

  /** The policy of calls to `appId`; undefined (at the cost of one check) when no resource applies. */
  forApp(appId: string): ResolvedPolicy | undefined {
    const p = this.current;
    return p.empty ? undefined : p.forApp(appId);
  }

  forComponent(name: string, type: string, dir: Direction): ResolvedPolicy | undefined {
    const p = this.current;
    return p.empty ? undefined : p.forComponent(name, type, dir);
  }

  /** `op` under `policy` (straight through when there is none), its tries counted. */
  run<T>(policy: ResolvedPolicy | undefined, op: (signal?: AbortSignal) => Promise<T>, o: RunOptions<T> = {}): Promise<T> {
    if (!policy) return op(o.signal);
    let observe = this.observers.get(policy);
    if (!observe) {
      observe = (outcome) => this.count(policy, outcome);
      this.observers.set(policy, observe);
    }
    return runPolicy(policy, op, { clock: this.clock, ...o, observe });
  }

  /** Every outcome counted so far. */
  outcomes(): PolicyCount[] {
    return [...this.counts.values()].map((c) => ({ ...c }));
  }

  /** The circuit breakers made so far and their states. */
  breakers(): ReturnType<Policies['breakerStates']> {
    return this.current.breakerStates();
  }

  /** The policies, breakers and counts for /v1.0/metadata; undefined when no Resiliency resource applies to this sidecar. */
  metadata(): ResiliencyMetadata | undefined {
    const p = this.current;
    if (p.resources.length === 0) return undefined;
    return { resources: [...p.resources], policies: p.policyNames(), circuitBreakers: p.breakerStates(), outcomes: this.outcomes() };
  }

  private count(p: ResolvedPolicy, outcome: Outcome): void {
    let mine = this.countsOf.get(p);
    const known = mine?.[outcome];
    if (known) {
      known.count++;
      return;
    }
    const policy = outcome === 'timeout' ? p.timeout?.name : outcome === 'circuit-open' ? p.breaker?.settings.name : p.retry?.name;
    const key = `${p.target}\n${policy ?? ''}\n${outcome}`;
    const c = this.counts.get(key);
    const entry = c ?? { target: p.target, policy: policy ?? '', outcome, count: 0 };
    if (!c) this.counts.set(key, entry);
    entry.count++;
    if (!mine) this.countsOf.set(p, (mine = {}));
    mine[outcome] = entry;
  }
}

/** The component registry's one lookup this needs: a loaded component's type. */
export interface ComponentTypes {
  get(name: string): { spec: { type: string } } | undefined;
}

/**
 * A call between the sidecar and component `name` under its policy for `dir` (Outbound: state,
 * secrets, bindings, publish; Inbound: an input binding's event to the app); straight through
 * without a resiliency service or a policy. An ApiError the call throws (a 4xx of the component's
 * own) is the caller's: given back at once, not retried, not counted against the circuit.
 */
export function componentCall<T>(resiliency: ResiliencyService | undefined, components: ComponentTypes, name: string, dir: Direction, call: (signal?: AbortSignal) => Promise<T>, o?: RunOptions<T>): Promise<T> {
  if (!resiliency) return call();
  const type = components.get(name)?.spec.type ?? '';
  const opts = o ? { isRequestError, ...o } : (COMPONENT_OPTIONS as RunOptions<T>);
  // the closure for the CLIENT span is made only while tracing is on: the off path allocates nothing for it
  if (resiliency.tracing && dir === 'Outbound') return resiliency.tracing.componentCall(name, type, undefined, () => resiliency.run(resiliency.forComponent(name, type, dir), call, opts));
  return resiliency.run(resiliency.forComponent(name, type, dir), call, opts);
}

const isRequestError = (e: unknown): boolean => e instanceof ApiError;
/** The options of a component call that gives none of its own: one object for all of them. */
const COMPONENT_OPTIONS: RunOptions<unknown> = Object.freeze({ isRequestError });
