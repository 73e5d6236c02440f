/**
 * crds/rules.ts runs the CRDs' CEL rules as plain functions so that a sidecar reading resource
 * files does not load CEL. These tests hold the functions to CEL itself: every rule in crds/*.yaml
 * has one, and on generated objects (fast-check: missing keys, nulls, numbers where strings
 * belong, lists, maps, unicode) each answers exactly as @bufbuild/cel evaluates the rule's text.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COMPILED_RULES, compiledRule } from '../../crds/rules.ts';
import { celLoaded, evaluateCel, loadCrds, validateResource, type OpenApiSchema } from '../../crds/validate.ts';

/** Every rule in the CRDs with the type of the field it sits on. */
function crdRules(): { rule: string; type: string }[] {
  const out: { rule: string; type: string }[] = [];
  const walk = (s: OpenApiSchema | undefined) => {
    if (!s) return;
    for (const r of s['x-kubernetes-validations'] ?? []) out.push({ rule: r.rule, type: s.type ?? 'object' });
    for (const sub of Object.values(s.properties ?? {})) walk(sub);
    walk(s.items);
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties);
  };
  for (const crd of loadCrds()) for (const v of crd.spec.versions) walk(v.schema.openAPIV3Schema);
  return out;
}

const scalar = fc.oneof(
  fc.string(),
  fc.constantFrom('', '8080', 'abc', 'Ab1', 'a'.repeat(65), 'ünï', 'state.redis', 'https://x', 'http://', 'handshakePort', 'eventSubscriptionName'),
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.boolean(),
  fc.constant(null),
);
const anyJson = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 4 }), scalar, { maxKeys: 3 }));
/** A map as the rules see one (metadata entries, headers, routes), with every key optional. */
const entry = fc.record(
  {
    name: fc.oneof(fc.constantFrom('handshakePort', 'eventSubscriptionName', 'other'), scalar),
    value: anyJson,
    secretKeyRef: anyJson,
    envRef: anyJson,
    rules: anyJson,
    default: anyJson,
  },
  { requiredKeys: [] },
);
const stringValue = fc.oneof(
  fc.string(),
  fc.constantFrom('state.redis', 'bindings.sftp', 'State.redis', 'state', 'state.', 'a.b c', 'x.y\n', 'https://h', 'http://', 'ftp://h', 'https://\n'),
  fc.string({ unit: 'grapheme' }),
);

describe('the CRD rules as functions (crds/rules.ts)', () => {
  const rules = crdRules();

  it('covers every rule in crds/*.yaml, so validating a resource never loads CEL', () => {
    expect(rules.length).toBeGreaterThan(0);
    for (const { rule } of rules) expect(COMPILED_RULES, `no function for rule ${rule}`).toContain(rule);
  });

  it('validates resources of every kind, each rule met and broken, without loading CEL', () => {
    const md = (entries: unknown[]) => ({ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'c' }, spec: { type: 'bindings.x', version: 'v1', metadata: entries } });
    const objects = [
      md([{ name: 'a', value: '1' }, { name: 'b', envRef: 'E' }, { name: 'c', secretKeyRef: { name: 's', key: 'k' } }]),
      md([{ name: 'a' }, { name: 'handshakePort', value: 1 }, { name: 'eventSubscriptionName', value: '!' }]),
      { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'c' }, spec: { type: 'Nope', version: 'v1' } },
      { apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's' }, spec: { pubsubname: 'p', topic: 't', routes: { rules: [] } } },
      { apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's' }, spec: { pubsubname: 'p', topic: 't', routes: { default: '/x' } } },
      { apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'h' }, spec: { baseUrl: 'ftp://x', headers: [{ name: 'a' }] } },
      { apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'h' }, spec: { baseUrl: 'https://x', headers: [{ name: 'a', value: 'v' }] } },
      { apiVersion: 'rt.io/v1alpha1', kind: 'Configuration', metadata: { name: 'cfg' }, spec: {} },
    ];
    const errors = objects.map((o) => validateResource(o).length);
    expect(errors).toEqual([0, 3, 1, 1, 0, 2, 0, 0]);
    expect(celLoaded()).toBe(false);
  });

  it('answers as CEL does on generated values, missing keys, nulls and wrong types included', () => {
    for (const { rule, type } of rules) {
      const f = compiledRule(rule)!;
      fc.assert(
        fc.property(type === 'string' ? stringValue : entry, (v) => {
          expect(f(v), `${rule} on ${JSON.stringify(v)}`).toBe(evaluateCel(rule, v));
        }),
        { numRuns: 400 },
      );
    }
  });

  it('refuses the resources CEL refuses, with the CRD message and field', () => {
    const component = (spec: unknown) => ({ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name: 'c' }, spec });
    expect(validateResource(component({ type: 'state.redis', version: 'v1' }))).toEqual([]);
    expect(validateResource(component({ type: 'Redis', version: 'v1' }))).toEqual([{ field: 'spec.type', message: 'must be <api>.<name>, e.g. state.redis or bindings.sftp' }]);
    const errs = validateResource(component({ type: 'bindings.x', version: 'v1', metadata: [{ name: 'handshakePort', value: 8080 }, { name: 'a' }] }));
    expect(errs.map((e) => e.field)).toEqual(['spec.metadata[0].value', 'spec.metadata[1]']);
  });
});
