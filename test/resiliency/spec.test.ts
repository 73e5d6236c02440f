/**
 * Resiliency resources as the reference runtime's documentation writes them, read unchanged; every
 * mistake refused with the field's path; the policy each target gets, default keywords included;
 * the trip expressions of circuit breakers against a plain evaluation of the same expression.
 */
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { Policies } from '../../sidecar/src/resiliency/policies.ts';
import { parseResiliency, type ResiliencySpec } from '../../sidecar/src/resiliency/spec.ts';
import { parseTrip, type Counts } from '../../sidecar/src/resiliency/trip.ts';
import { ManualClock } from '../../shared/clock.ts';

// the full example of the reference runtime's resiliency overview, as published
const DOCUMENTED = `
apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata:
  name: myresiliency
scopes:
  - app1
  - app2
spec:
  policies:
    timeouts:
      general: 5s
      important: 60s
      largeResponse: 10s
    retries:
      pubsubRetry:
        policy: constant
        duration: 5s
        maxRetries: 10
      retryForever:
        policy: exponential
        maxInterval: 15s
        maxRetries: -1
      important:
        policy: constant
        duration: 5s
        maxRetries: 30
      someOperation:
        policy: exponential
        maxInterval: 15s
      largeResponse:
        policy: constant
        duration: 5s
        maxRetries: 3
      retry5xxOnly:
        policy: constant
        duration: 5s
        maxRetries: 3
        matching:
          httpStatusCodes: "429,500-599"
          gRPCStatusCodes: "1-4,8-11,13,14"
    circuitBreakers:
      simpleCB:
        maxRequests: 1
        timeout: 30s
        trip: consecutiveFailures >= 5
      pubsubCB:
        maxRequests: 1
        interval: 8s
        timeout: 45s
        trip: consecutiveFailures > 8
  targets:
    apps:
      appB:
        timeout: general
        retry: important
        circuitBreaker: simpleCB
    actors:
      myActorType:
        timeout: general
        retry: important
        circuitBreaker: simpleCB
        circuitBreakerScope: both
        circuitBreakerCacheSize: 5000
    components:
      statestore1:
        outbound:
          timeout: general
          retry: retryForever
          circuitBreaker: simpleCB
      pubsub1:
        outbound:
          retry: pubsubRetry
          circuitBreaker: pubsubCB
        inbound:
          timeout: general
          retry: important
          circuitBreaker: pubsubCB
`;

class FieldError extends Error {}
const fail = (field: string, problem: string): never => {
  throw new FieldError(`${field}: ${problem}`);
};
const read = (text: string): ResiliencySpec => {
  const doc = parseYaml(text) as { metadata: { name: string }; scopes?: unknown; spec: unknown };
  return parseResiliency(doc.metadata.name, doc.scopes, doc.spec, fail);
};

describe('Resiliency resources', () => {
  it('reads the documented example unchanged', () => {
    const s = read(DOCUMENTED);
    expect(s.scopes).toEqual(['app1', 'app2']);
    expect(Object.fromEntries(s.timeouts)).toEqual({ general: 5000, important: 60_000, largeResponse: 10_000 });
    expect(s.retries.get('retryForever')).toMatchObject({ policy: 'exponential', maxIntervalMs: 15_000, maxRetries: -1 });
    expect(s.retries.get('someOperation')).toMatchObject({ policy: 'exponential', maxRetries: -1 });
    expect(s.retries.get('retry5xxOnly')?.httpStatusCodes).toEqual([[429, 429], [500, 599]]);
    expect(s.retries.get('retry5xxOnly')?.grpcStatusCodes).toEqual([[1, 4], [8, 11], [13, 13], [14, 14]]);
    expect(s.circuitBreakers.get('pubsubCB')).toMatchObject({ maxRequests: 1, intervalMs: 8000, timeoutMs: 45_000, tripText: 'consecutiveFailures > 8' });
    expect(s.components.get('pubsub1')?.inbound).toEqual({ timeout: 'general', retry: 'important', circuitBreaker: 'pubsubCB' });
    expect(s.actors.get('myActorType')).toEqual({ timeout: 'general', retry: 'important', circuitBreaker: 'simpleCB' });
  });

  it.each([
    ['spec:\n  targets: {}', /spec.policies: is required/],
    ['spec:\n  policies:\n    timeouts:\n      general: soon', /spec.policies.timeouts.general: must be a duration/],
    ['spec:\n  policies:\n    timeouts:\n      general: -5s', /spec.policies.timeouts.general: must be a duration/],
    ['spec:\n  policies:\n    retries:\n      r:\n        policy: linear', /spec.policies.retries.r.policy: must be constant or exponential/],
    ['spec:\n  policies:\n    retries:\n      r:\n        maxRetries: -2', /spec.policies.retries.r.maxRetries: must be a whole number of at least -1/],
    ['spec:\n  policies:\n    retries:\n      r:\n        maxRetries: 2.5', /maxRetries: must be a whole number/],
    ['spec:\n  policies:\n    retries:\n      r:\n        matching:\n          httpStatusCodes: "429,600"', /matching.httpStatusCodes: "600" is not a code or range within 100-599/],
    ['spec:\n  policies:\n    retries:\n      r:\n        matching:\n          gRPCStatusCodes: "4-2"', /matching.gRPCStatusCodes: "4-2" is not a code or range within 0-16/],
    ['spec:\n  policies:\n    circuitBreakers:\n      cb:\n        trip: consecutiveFailures >', /spec.policies.circuitBreakers.cb.trip: .* ends where a count or a number was expected/],
    ['spec:\n  policies:\n    circuitBreakers:\n      cb:\n        trip: failures > 3', /cb.trip: .*"failures" is not one of/],
    ['spec:\n  policies:\n    circuitBreakers:\n      cb:\n        trip: consecutiveFailures > 3 ;', /cb.trip: .*cannot read ";"/],
    ['spec:\n  policies: {}\n  targets:\n    apps:\n      b:\n        retry: nope', /spec.targets.apps.b.retry: names the retry policy "nope", which spec.policies.retries does not define/],
    ['spec:\n  policies: {}\n  targets:\n    components:\n      s:\n        sideways: {}', /spec.targets.components.s.sideways: is not a direction/],
    ['scopes: app1\nspec:\n  policies: {}', /scopes: must be a list of app ids/],
  ])('refuses %j with the field', (yaml, message) => {
    expect(() => read(`metadata:\n  name: r\n${yaml}`)).toThrow(message);
  });

  it('never throws anything but a field error on arbitrary input', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (scopes, spec) => {
        try {
          parseResiliency('r', scopes, spec, fail);
        } catch (e) {
          expect(e).toBeInstanceOf(FieldError);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('the policy each target gets', () => {
  const clock = new ManualClock();
  it('named targets get what they name; scopes are honoured', () => {
    const s = read(DOCUMENTED);
    const p = new Policies([s], 'app1', clock);
    expect(p.forApp('appB')).toMatchObject({ target: 'app:appB', timeout: { name: 'general', ms: 5000 }, retry: { name: 'important' } });
    expect(p.forApp('appB')?.breaker?.settings.name).toBe('simpleCB');
    expect(p.forComponent('pubsub1', 'pubsub.redis', 'Inbound')).toMatchObject({ timeout: { name: 'general' }, retry: { name: 'important' } });
    expect(p.forComponent('pubsub1', 'pubsub.redis', 'Outbound')?.timeout).toBeUndefined();
    expect(p.forApp('other')).toBeUndefined();
    expect(new Policies([s], 'app3', clock).empty).toBe(true);
  });

  it('falls back to the default keywords, most specific first', () => {
    const s = read(`metadata: { name: d }
spec:
  policies:
    timeouts: { DefaultTimeoutPolicy: 9s, DefaultAppTimeoutPolicy: 3s, DefaultComponentOutboundTimeoutPolicy: 4s, DefaultStatestoreComponentOutboundTimeoutPolicy: 1s, DefaultSecretstoreComponentTimeoutPolicy: 2s, own: 7s }
    retries: { DefaultRetryPolicy: { maxRetries: 2 }, DefaultPubsubComponentInboundRetryPolicy: { maxRetries: 6 } }
  targets:
    components:
      store2: { outbound: { timeout: own } }
`);
    const p = new Policies([s], 'any', clock);
    expect(p.forApp('x')?.timeout).toEqual({ name: 'DefaultAppTimeoutPolicy', ms: 3000 });
    expect(p.forApp('x')?.retry?.name).toBe('DefaultRetryPolicy');
    expect(p.forComponent('store1', 'state.redis', 'Outbound')?.timeout?.name).toBe('DefaultStatestoreComponentOutboundTimeoutPolicy');
    expect(p.forComponent('store2', 'state.redis', 'Outbound')?.timeout?.name).toBe('own');
    expect(p.forComponent('store2', 'state.redis', 'Outbound')?.retry?.name).toBe('DefaultRetryPolicy');
    expect(p.forComponent('vault', 'secretstores.local.file', 'Outbound')?.timeout?.name).toBe('DefaultSecretstoreComponentTimeoutPolicy');
    expect(p.forComponent('files', 'bindings.sftp', 'Outbound')?.timeout?.name).toBe('DefaultComponentOutboundTimeoutPolicy');
    expect(p.forComponent('files', 'bindings.sftp', 'Inbound')?.timeout?.name).toBe('DefaultTimeoutPolicy');
    expect(p.forComponent('events', 'pubsub.redis', 'Inbound')?.retry?.name).toBe('DefaultPubsubComponentInboundRetryPolicy');
  });

  it('a later resource replaces a policy of the same name; a breaker keeps its state across a reload that keeps its policy', () => {
    const a = read('metadata: { name: a }\nspec:\n  policies:\n    timeouts: { t: 1s }\n    circuitBreakers: { cb: { trip: consecutiveFailures > 0, timeout: 10s } }\n  targets:\n    apps: { b: { timeout: t, circuitBreaker: cb } }');
    const b = read('metadata: { name: b }\nspec:\n  policies:\n    timeouts: { t: 2s }');
    const first = new Policies([a, b], 'me', clock);
    expect(first.forApp('b')?.timeout?.ms).toBe(2000);
    first.forApp('b')!.breaker!.admit()(false);
    expect(first.forApp('b')!.breaker!.state).toBe('open');
    expect(new Policies([a], 'me', clock, first).forApp('b')!.breaker!.state).toBe('open');
    const changed = read('metadata: { name: a }\nspec:\n  policies:\n    circuitBreakers: { cb: { trip: consecutiveFailures > 3 } }\n  targets:\n    apps: { b: { circuitBreaker: cb } }');
    expect(new Policies([changed], 'me', clock, first).forApp('b')!.breaker!.state).toBe('closed');
    expect(first.breakerStates()).toEqual([{ target: 'app:b', policy: 'cb', state: 'open' }]);
  });
});

describe('trip expressions', () => {
  const names = ['requests', 'totalSuccesses', 'totalFailures', 'consecutiveSuccesses', 'consecutiveFailures'] as const;
  const ops = ['>', '>=', '<', '<=', '==', '!='] as const;
  const operand = fc.oneof(fc.constantFrom(...names), fc.nat({ max: 20 }).map(String));
  const comparison = fc.tuple(operand, fc.constantFrom(...ops), operand).map(([a, op, b]) => `${a} ${op} ${b}`);
  const expr = fc.letrec<{ e: string }>((tie) => ({
    e: fc.oneof({ depthSize: 'small', withCrossShrink: true }, comparison, fc.tuple(tie('e'), fc.constantFrom('&&', '||'), tie('e')).map(([a, j, b]) => `${a} ${j} ${b}`), tie('e').map((x) => `(${x})`)),
  })).e;
  const counts = fc.record(Object.fromEntries(names.map((n) => [n, fc.nat({ max: 20 })])) as Record<keyof Counts, fc.Arbitrary<number>>);

  it('evaluates as the same expression does in plain JavaScript', () => {
    fc.assert(
      fc.property(expr, counts, (text, c) => {
        const plain = new Function(...names, `return ${text.replaceAll('==', '===')};`)(...names.map((n) => c[n])) as boolean;
        expect(parseTrip(text)(c)).toBe(plain);
      }),
      { numRuns: 500 },
    );
  });
});
