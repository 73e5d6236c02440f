/**
 * The Subscription CRD's conversion (operator/src/conversion.ts): v1alpha1's route becomes
 * v2alpha1's routes.default and back; rules survive a round trip through v1alpha1 (the API
 * server expects conversions to lose nothing); a changed route wins over the kept rules; a
 * malformed review gets a Failure answer, never an exception.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { convertSubscription, reviewConversion, ROUTES_ANNOTATION } from '../../operator/src/conversion.ts';

const v1 = (route: string, extra: Record<string, unknown> = {}) => ({ apiVersion: 'rt.io/v1alpha1', kind: 'Subscription', metadata: { name: 's', namespace: 'n', uid: 'u1' }, spec: { pubsubname: 'bus', topic: 'orders', route, deadLetterTopic: 'dead', metadata: { rawPayload: 'true' }, ...extra }, scopes: ['a'] });
const v2 = (routes: Record<string, unknown>, annotations?: Record<string, string>) => ({ apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's', namespace: 'n', ...(annotations ? { annotations } : {}) }, spec: { pubsubname: 'bus', topic: 'orders', routes } });

describe('Subscription conversion', () => {
  it('v1alpha1 route ↔ v2alpha1 routes.default, everything else carried', () => {
    const up = convertSubscription(v1('/orders'), 'rt.io/v2alpha1');
    expect(up).toEqual({ apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's', namespace: 'n', uid: 'u1' }, spec: { pubsubname: 'bus', topic: 'orders', routes: { default: '/orders' }, deadLetterTopic: 'dead', metadata: { rawPayload: 'true' } }, scopes: ['a'] });
    expect(convertSubscription(up, 'rt.io/v1alpha1')).toEqual(v1('/orders'));
  });

  it('keeps rules through v1alpha1 and gives them back; a route changed meanwhile becomes the default', () => {
    const routes = { rules: [{ match: 'event.type == "big"', path: '/big' }], default: '/all' };
    const down = convertSubscription(v2(routes), 'rt.io/v1alpha1');
    expect(down.spec).toMatchObject({ route: '/all' });
    expect(JSON.parse((down.metadata!.annotations as Record<string, string>)[ROUTES_ANNOTATION])).toEqual(routes);
    expect(convertSubscription(down, 'rt.io/v2alpha1')).toEqual(v2(routes));
    // rules only: the first rule's path is the v1alpha1 route
    expect(convertSubscription(v2({ rules: [{ match: 'true', path: '/r' }] }), 'rt.io/v1alpha1').spec).toMatchObject({ route: '/r' });
    const edited = { ...down, spec: { ...down.spec, route: '/new' } };
    expect(convertSubscription(edited, 'rt.io/v2alpha1')).toEqual(v2({ default: '/new' }));
  });

  it('property: any v2alpha1 routes survive v2 → v1 → v2', () => {
    const path = fc.stringMatching(/^\/[a-z0-9/-]{0,20}$/);
    const routes = fc.record({ rules: fc.array(fc.record({ match: fc.string({ maxLength: 30 }), path }), { maxLength: 4 }), default: fc.option(path, { nil: undefined }) }, { requiredKeys: ['rules'] })
      .filter((r) => r.rules.length > 0 || r.default !== undefined)
      .map((r) => (r.default === undefined ? { rules: r.rules } : r));
    fc.assert(
      fc.property(routes, (r) => {
        expect(convertSubscription(convertSubscription(v2(r), 'rt.io/v1alpha1'), 'rt.io/v2alpha1')).toEqual(v2(r));
      }),
    );
  });

  it('answers a ConversionReview, and a bad one with a Failure naming why', () => {
    const ok = reviewConversion({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview', request: { uid: 'x', desiredAPIVersion: 'rt.io/v2alpha1', objects: [v1('/a')] } });
    expect(ok.response).toMatchObject({ uid: 'x', result: { status: 'Success' }, convertedObjects: [{ apiVersion: 'rt.io/v2alpha1', spec: { routes: { default: '/a' } } }] });
    for (const bad of [null, 'x', {}, { kind: 'ConversionReview', request: { uid: 'y' } }, { kind: 'ConversionReview', request: { uid: 'z', desiredAPIVersion: 'rt.io/v9', objects: [v1('/a')] } }, { kind: 'ConversionReview', request: { uid: 'w', desiredAPIVersion: 'rt.io/v2alpha1', objects: [{ kind: 'Component', apiVersion: 'rt.io/v1alpha1' }] } }]) {
      const r = reviewConversion(bad);
      expect(r.response.result).toMatchObject({ status: 'Failure', message: expect.stringMatching(/^rt operator: /) });
    }
    fc.assert(fc.property(fc.jsonValue(), (j) => void reviewConversion({ kind: 'ConversionReview', request: { uid: 'p', desiredAPIVersion: 'rt.io/v1alpha1', objects: [j] } })));
  });
});
