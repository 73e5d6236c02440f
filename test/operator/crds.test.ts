/**
 * The CRDs against the real kube-apiserver and real kubectl: `kubectl apply` refuses a bad object
 * at once with a message naming the field, accepts good ones, and crds/validate.ts (what resource
 * files and the operator use) agrees with the API server on every case of the table.
 */
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateResource } from '../../crds/validate.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, startKube, type KubeCluster } from '../services/kube.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');
const CRDS = join(import.meta.dirname, '../../crds');
const NS = 'crd-cases';

const component = (name: string, spec: object, extra: object = {}) => ({ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name, namespace: NS }, spec, ...extra });

interface Case {
  description: string;
  object: Record<string, unknown>;
  /** undefined: accepted. Otherwise the field the refusal names and words from its message. */
  expected?: { field: string; message: RegExp };
}

const cases: Case[] = [
  { description: 'a valid component', object: component('ok', { type: 'state.redis', version: 'v1', metadata: [{ name: 'redisHost', value: 'localhost:6379' }, { name: 'redisDB', value: 2 }] }) },
  { description: 'spec.type without a dot', object: component('t1', { type: 'redis', version: 'v1' }), expected: { field: 'spec.type', message: /must be <api>\.<name>/ } },
  { description: 'spec.type with an upper-case api', object: component('t2', { type: 'State.redis', version: 'v1' }), expected: { field: 'spec.type', message: /must be <api>\.<name>/ } },
  { description: 'spec.version missing', object: component('t3', { type: 'state.redis' }), expected: { field: 'spec.version', message: /[Rr]equired/ } },
  {
    description: 'a metadata entry with value and secretKeyRef',
    object: component('m1', { type: 'state.redis', version: 'v1', metadata: [{ name: 'redisPassword', value: 'x', secretKeyRef: { name: 's', key: 'k' } }] }),
    expected: { field: 'spec.metadata[0]', message: /exactly one of value, secretKeyRef or envRef/ },
  },
  {
    description: 'a metadata entry with neither value, secretKeyRef nor envRef',
    object: component('m2', { type: 'state.redis', version: 'v1', metadata: [{ name: 'redisHost', value: 'h' }, { name: 'redisPassword' }] }),
    expected: { field: 'spec.metadata[1]', message: /exactly one of value, secretKeyRef or envRef/ },
  },
  { description: 'a metadata entry from envRef', object: component('m3', { type: 'state.redis', version: 'v1', metadata: [{ name: 'redisHost', envRef: 'REDIS_HOST' }] }) },
  {
    description: 'handshakePort as a number',
    object: component('h1', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'handshakePort', value: 8080 }] }),
    expected: { field: 'spec.metadata[0].value', message: /handshakePort must be a quoted string/ },
  },
  { description: 'handshakePort quoted', object: component('h2', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'handshakePort', value: '8080' }] }) },
  {
    description: 'eventSubscriptionName too short',
    object: component('e1', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'eventSubscriptionName', value: 'ab' }] }),
    expected: { field: 'spec.metadata[0].value', message: /3 to 64 letters or digits/ },
  },
  {
    description: 'eventSubscriptionName with a dash',
    object: component('e2', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'eventSubscriptionName', value: 'my-sub' }] }),
    expected: { field: 'spec.metadata[0].value', message: /3 to 64 letters or digits/ },
  },
  {
    description: 'eventSubscriptionName of 65 characters',
    object: component('e3', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'eventSubscriptionName', value: 'a'.repeat(65) }] }),
    expected: { field: 'spec.metadata[0].value', message: /3 to 64 letters or digits/ },
  },
  { description: 'eventSubscriptionName valid', object: component('e4', { type: 'bindings.azure.eventgrid', version: 'v1', metadata: [{ name: 'eventSubscriptionName', value: 'orders2024' }] }) },
  {
    description: 'a v2alpha1 Subscription with routes',
    object: { apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's1', namespace: NS }, spec: { pubsubname: 'ps', topic: 't', routes: { rules: [{ match: 'event.type == "a"', path: '/a' }], default: '/d' } }, scopes: ['app1'] },
  },
  {
    description: 'a v2alpha1 Subscription with neither rules nor default',
    object: { apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 's2', namespace: NS }, spec: { pubsubname: 'ps', topic: 't', routes: {} } },
    expected: { field: 'spec.routes', message: /at least one rule or a default route/ },
  },
  { description: 'a v1alpha1 Subscription with route', object: { apiVersion: 'rt.io/v1alpha1', kind: 'Subscription', metadata: { name: 's3', namespace: NS }, spec: { pubsubname: 'ps', topic: 't', route: '/r' } } },
  {
    description: 'an HTTPEndpoint with an ftp URL',
    object: { apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'x1', namespace: NS }, spec: { baseUrl: 'ftp://example.invalid' } },
    expected: { field: 'spec.baseUrl', message: /http:\/\/ or https:\/\/ URL/ },
  },
  {
    description: 'an HTTPEndpoint header with value and secretKeyRef',
    object: { apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'x2', namespace: NS }, spec: { baseUrl: 'https://example.invalid', headers: [{ name: 'a', value: 'b', secretKeyRef: { name: 's' } }] } },
    expected: { field: 'spec.headers[0]', message: /exactly one of value or secretKeyRef/ },
  },
  { description: 'a Configuration with features and other settings', object: { apiVersion: 'rt.io/v1alpha1', kind: 'Configuration', metadata: { name: 'c1', namespace: NS }, spec: { features: [{ name: 'F', enabled: true }], tracing: { samplingRate: '1' } } } },
];

describe.skipIf(!available)('CRDs on a real kube-apiserver', () => {
  let kube: KubeCluster;

  beforeAll(async () => {
    kube = await startKube({ controllers: false });
    const r = await kube.kubectl(['apply', '-f', CRDS]);
    expect(r.stderr).toBe('');
    const w = await kube.kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.rt.io', 'crd/configurations.rt.io', 'crd/subscriptions.rt.io', 'crd/httpendpoints.rt.io']);
    expect(w.code, w.stderr).toBe(0);
    // no controller manager here, so no default service account: kubectl create namespace is enough
    expect((await kube.kubectl(['create', 'namespace', NS])).code).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await kube?.stop();
  });

  it.each(cases)('kubectl apply: $description', async ({ object, expected }) => {
    const r = await kube.kubectl(['apply', '-f', '-'], { input: stringify(object) });
    const local = validateResource(object);
    if (!expected) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(local).toEqual([]);
      return;
    }
    expect(r.code).not.toBe(0);
    // the API server's words: `<field>: Invalid value: …: <message>` (or `<field>: Required value`)
    expect(r.stderr).toContain(`${expected.field}:`);
    expect(r.stderr).toMatch(expected.message);
    // the same object from a file: the same field, the same rule's message
    expect(local.length).toBeGreaterThan(0);
    expect(local[0].field).toBe(expected.field);
    expect(`${local[0].field}: ${local[0].message}`).toMatch(expected.field === 'spec.version' ? /spec\.version: is required/ : expected.message);
  });

  it('serves Subscriptions at v2alpha1 and v1alpha1, status as a subresource, and printer columns', async () => {
    const get = await kube.kubectl(['get', 'subscriptions.v1alpha1.rt.io', 's3', '-n', NS, '-o', 'json']);
    expect(get.code, get.stderr).toBe(0);
    expect(JSON.parse(get.stdout).apiVersion).toBe('rt.io/v1alpha1');
    const cols = await kube.kubectl(['get', 'components', '-n', NS]);
    expect(cols.stdout).toMatch(/NAME\s+TYPE\s+READY\s+AGE/);
    const crd = JSON.parse((await kube.kubectl(['get', 'crd', 'components.rt.io', '-o', 'json'])).stdout);
    expect(crd.spec.versions[0].subresources).toEqual({ status: {} });
  });
});
