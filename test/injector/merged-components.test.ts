/**
 * The injector reads Components of both groups as the operator serves them: rt.io first, then
 * dapr.io, one name once (an rt.io Component hides a dapr.io one of the same name); the merged
 * cache is synced only when every group's is.
 */
import { describe, expect, it } from 'vitest';
import { MergedComponents, StaticComponents, type ComponentLister, type ComponentObject } from '../../injector/src/components.ts';

const c = (group: string, name: string, ns = 'shop'): ComponentObject => ({ apiVersion: `${group}/v1alpha1`, kind: 'Component', metadata: { name, namespace: ns }, spec: { type: 'state.x' } });

describe('MergedComponents', () => {
  it('lists rt.io and dapr.io Components of a namespace, the rt.io one winning a shared name', () => {
    const rt = new StaticComponents([c('rt.io', 'orders'), c('rt.io', 'cache'), c('rt.io', 'other', 'elsewhere')]);
    const dapr = new StaticComponents([c('dapr.io', 'orders'), c('dapr.io', 'legacy')]);
    const merged = new MergedComponents([rt, dapr]);
    expect(merged.list('shop').map((o) => `${o.apiVersion} ${o.metadata?.name}`)).toEqual(['rt.io/v1alpha1 orders', 'rt.io/v1alpha1 cache', 'dapr.io/v1alpha1 legacy']);
    expect(merged.list('nowhere')).toEqual([]);
  });

  it('is synced only when every group is', () => {
    const slow: ComponentLister & { synced: boolean } = { synced: false, list: () => [] };
    const merged = new MergedComponents([new StaticComponents(), slow]);
    expect(merged.synced).toBe(false);
    slow.synced = true;
    expect(merged.synced).toBe(true);
  });
});
