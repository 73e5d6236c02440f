/**
 * The watchdog reads "asks for injection" with the injector's own annotation table: a pod the
 * injector would inject (dapr.io aliases, "yes", "1", …) never slips past it, and one it would
 * leave alone is never reported.
 */
import type * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { injectionRequested } from '../../injector/src/annotations.ts';
import { uninjected } from '../../operator/src/watchdog.ts';

const pod = (annotations: Record<string, string>, containers = ['app']): k8s.V1Pod => ({ metadata: { name: 'p', namespace: 'n', uid: 'u', annotations }, spec: { containers: containers.map((name) => ({ name })) } });

describe('the watchdog', () => {
  it.each([
    [{ 'rt.io/enabled': 'true' }, true],
    [{ 'dapr.io/enabled': 'true' }, true],
    [{ 'rt.io/enabled': 'yes' }, true],
    [{ 'dapr.io/enabled': '1' }, true],
    [{ 'rt.io/enabled': 'false' }, false],
    [{ 'rt.io/enabled': 'no' }, false],
    [{}, false],
  ])('agrees with the injector on %j', (annotations, expected) => {
    expect(injectionRequested(annotations)).toBe(expected);
    expect(uninjected(pod(annotations))).toBe(expected);
  });

  it('does not report a pod that has its sidecar, or one being deleted', () => {
    expect(uninjected(pod({ 'dapr.io/enabled': 'true' }, ['app', 'rt-sidecar']))).toBe(false);
    expect(uninjected({ ...pod({ 'rt.io/enabled': 'true' }), metadata: { ...pod({ 'rt.io/enabled': 'true' }).metadata, deletionTimestamp: new Date() } })).toBe(false);
  });
});
