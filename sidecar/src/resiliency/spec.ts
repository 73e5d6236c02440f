/**
 * A `Resiliency` resource as written for the reference runtime (`dapr.io/v1alpha1`) or for rt
 * (`rt.io/v1alpha1`): named policies (timeouts, retries, circuit breakers) and the targets they
 * apply to (apps, components in each direction, actors). Read once, checked whole: a field that is
 * wrong is refused with its path, never found out when a call fails.
 */
import { parseDuration } from '../../../shared/duration.ts';
import { parseTrip, TripError, type TripCondition } from './trip.ts';

/** Status codes to retry: single codes and ranges, as `matching.httpStatusCodes: "429,500-599"`. */
export type CodeSet = ReadonlyArray<readonly [number, number]>;

export interface RetrySettings {
  name: string;
  policy: 'constant' | 'exponential';
  /** constant: the wait between tries. */
  durationMs: number;
  /** exponential: the longest wait. */
  maxIntervalMs: number;
  /** Retries after the first try; -1: no limit. */
  maxRetries: number;
  /** Only failures with one of these codes are retried (undefined: every failure). */
  httpStatusCodes?: CodeSet;
  grpcStatusCodes?: CodeSet;
}

export interface BreakerPolicy {
  name: string;
  maxRequests: number;
  intervalMs: number;
  timeoutMs: number;
  /** As written, for the metadata API. */
  tripText: string;
  trip: TripCondition;
}

/** The policy names a target refers to. */
export interface TargetPolicies {
  timeout?: string;
  retry?: string;
  circuitBreaker?: string;
}

export interface ResiliencySpec {
  name: string;
  scopes: string[];
  timeouts: Map<string, number>;
  retries: Map<string, RetrySettings>;
  circuitBreakers: Map<string, BreakerPolicy>;
  apps: Map<string, TargetPolicies>;
  components: Map<string, { outbound?: TargetPolicies; inbound?: TargetPolicies }>;
  /** Read and checked; actors are not served by rt (yet), so they apply nowhere. */
  actors: Map<string, TargetPolicies>;
}

export type Fail = (field: string, problem: string) => never;

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function mapping(v: unknown, field: string, fail: Fail): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (!isMap(v)) fail(field, 'must be a mapping');
  return v as Record<string, unknown>;
}

function duration(v: unknown, field: string, fail: Fail, fallback?: number): number {
  if (v === undefined || v === null || v === '') {
    if (fallback === undefined) fail(field, 'is required (a duration such as 5s, 500ms or 1m30s)');
    return fallback!;
  }
  const ms = typeof v === 'number' ? v * 1000 : typeof v === 'string' ? parseDuration(v) : undefined;
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) fail(field, `must be a duration such as 5s, 500ms or 1m30s, not ${JSON.stringify(v)}`);
  return ms!;
}

function whole(v: unknown, field: string, fail: Fail, fallback: number, min: number): number {
  if (v === undefined || v === null || v === '') return fallback;
  const n = typeof v === 'string' ? Number(v.trim()) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min) fail(field, `must be a whole number of at least ${min}, not ${JSON.stringify(v)}`);
  return n as number;
}

/** "429,500-599" → [[429,429],[500,599]], each code within [lo, hi]. */
export function parseCodeSet(text: unknown, field: string, fail: Fail, lo: number, hi: number): CodeSet | undefined {
  if (text === undefined || text === null || text === '') return undefined;
  if (typeof text !== 'string' && typeof text !== 'number') fail(field, 'must be a comma-separated string of codes and ranges, such as "429,500-599"');
  const out: [number, number][] = [];
  for (const part of String(text).split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    const a = m ? Number(m[1]) : NaN;
    const b = m?.[2] !== undefined ? Number(m[2]) : a;
    if (!m || a < lo || b > hi || a > b) fail(field, `"${part.trim()}" is not a code or range within ${lo}-${hi}`);
    out.push([a, b]);
  }
  return out;
}

export function inCodeSet(set: CodeSet, code: number): boolean {
  return set.some(([a, b]) => code >= a && code <= b);
}

function retrySettings(name: string, v: unknown, field: string, fail: Fail): RetrySettings {
  const o = mapping(v, field, fail);
  const policy = o.policy === undefined || o.policy === '' ? 'constant' : o.policy;
  if (policy !== 'constant' && policy !== 'exponential') fail(`${field}.policy`, `must be constant or exponential, not ${JSON.stringify(o.policy)}`);
  const matching = mapping(o.matching, `${field}.matching`, fail);
  return {
    name,
    policy: policy as 'constant' | 'exponential',
    durationMs: duration(o.duration, `${field}.duration`, fail, 5000),
    maxIntervalMs: duration(o.maxInterval, `${field}.maxInterval`, fail, 60_000),
    maxRetries: whole(o.maxRetries, `${field}.maxRetries`, fail, -1, -1),
    httpStatusCodes: parseCodeSet(matching.httpStatusCodes, `${field}.matching.httpStatusCodes`, fail, 100, 599),
    grpcStatusCodes: parseCodeSet(matching.gRPCStatusCodes, `${field}.matching.gRPCStatusCodes`, fail, 0, 16),
  };
}

function breakerPolicy(name: string, v: unknown, field: string, fail: Fail): BreakerPolicy {
  const o = mapping(v, field, fail);
  const tripText = o.trip === undefined || o.trip === '' ? 'consecutiveFailures > 5' : o.trip;
  if (typeof tripText !== 'string') fail(`${field}.trip`, 'must be an expression such as "consecutiveFailures > 5"');
  let trip: TripCondition;
  try {
    trip = parseTrip(tripText as string);
  } catch (e) {
    if (e instanceof TripError) fail(`${field}.trip`, `${JSON.stringify(tripText)} ${e.message}`);
    throw e;
  }
  return {
    name,
    maxRequests: Math.max(1, whole(o.maxRequests, `${field}.maxRequests`, fail, 1, 0)),
    intervalMs: duration(o.interval, `${field}.interval`, fail, 0),
    timeoutMs: duration(o.timeout, `${field}.timeout`, fail, 60_000),
    tripText: tripText as string,
    trip: trip!,
  };
}

/** Reads `spec` (and `scopes`) of a Resiliency resource named `name`. */
export function parseResiliency(name: string, scopes: unknown, spec: unknown, fail: Fail): ResiliencySpec {
  const s = mapping(spec, 'spec', fail);
  if (s.policies === undefined) fail('spec.policies', 'is required');
  const policies = mapping(s.policies, 'spec.policies', fail);
  const timeouts = new Map<string, number>();
  for (const [k, v] of Object.entries(mapping(policies.timeouts, 'spec.policies.timeouts', fail))) timeouts.set(k, duration(v, `spec.policies.timeouts.${k}`, fail));
  const retries = new Map<string, RetrySettings>();
  for (const [k, v] of Object.entries(mapping(policies.retries, 'spec.policies.retries', fail))) retries.set(k, retrySettings(k, v, `spec.policies.retries.${k}`, fail));
  const circuitBreakers = new Map<string, BreakerPolicy>();
  for (const [k, v] of Object.entries(mapping(policies.circuitBreakers, 'spec.policies.circuitBreakers', fail))) circuitBreakers.set(k, breakerPolicy(k, v, `spec.policies.circuitBreakers.${k}`, fail));

  const refs = (v: unknown, field: string): TargetPolicies => {
    const o = mapping(v, field, fail);
    const ref = (key: 'timeout' | 'retry' | 'circuitBreaker', known: Map<string, unknown>, kind: string): string | undefined => {
      const r = o[key];
      if (r === undefined || r === null || r === '') return undefined;
      if (typeof r !== 'string') fail(`${field}.${key}`, `must name a ${kind} policy`);
      if (!known.has(r as string)) fail(`${field}.${key}`, `names the ${kind} policy "${r}", which spec.policies.${kind === 'timeout' ? 'timeouts' : kind === 'retry' ? 'retries' : 'circuitBreakers'} does not define`);
      return r as string;
    };
    return { timeout: ref('timeout', timeouts, 'timeout'), retry: ref('retry', retries, 'retry'), circuitBreaker: ref('circuitBreaker', circuitBreakers, 'circuit breaker') };
  };
  const targets = mapping(s.targets, 'spec.targets', fail);
  const apps = new Map<string, TargetPolicies>();
  for (const [k, v] of Object.entries(mapping(targets.apps, 'spec.targets.apps', fail))) apps.set(k, refs(v, `spec.targets.apps.${k}`));
  const components = new Map<string, { outbound?: TargetPolicies; inbound?: TargetPolicies }>();
  for (const [k, v] of Object.entries(mapping(targets.components, 'spec.targets.components', fail))) {
    const o = mapping(v, `spec.targets.components.${k}`, fail);
    for (const d of Object.keys(o)) if (d !== 'outbound' && d !== 'inbound') fail(`spec.targets.components.${k}.${d}`, 'is not a direction: outbound or inbound');
    components.set(k, {
      outbound: o.outbound === undefined ? undefined : refs(o.outbound, `spec.targets.components.${k}.outbound`),
      inbound: o.inbound === undefined ? undefined : refs(o.inbound, `spec.targets.components.${k}.inbound`),
    });
  }
  const actors = new Map<string, TargetPolicies>();
  for (const [k, v] of Object.entries(mapping(targets.actors, 'spec.targets.actors', fail))) {
    const o = mapping(v, `spec.targets.actors.${k}`, fail);
    const { circuitBreakerScope: _scope, circuitBreakerCacheSize: _size, ...rest } = o;
    actors.set(k, refs(rest, `spec.targets.actors.${k}`));
  }
  if (scopes !== undefined && scopes !== null && !(Array.isArray(scopes) && scopes.every((x) => typeof x === 'string'))) fail('scopes', 'must be a list of app ids');
  return { name, scopes: (scopes as string[] | undefined) ?? [], timeouts, retries, circuitBreakers, apps, components, actors };
}
