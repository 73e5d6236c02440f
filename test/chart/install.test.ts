/**
 * The chart on a real cluster with a real node and a pod network: `helm install --wait` with
 * e2e/values-local.yaml (the defaults but for the image and the scheduler's storage) establishes
 * the CRDs and brings the operator, injector and scheduler pods to Ready; the API server calls
 * the injector through its Service, and it adds rt-sidecar to an annotated pod; `helm upgrade` keeps the
 * webhook certificate; `helm uninstall` leaves nothing behind.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import type { KubeCluster } from '../services/kube.ts';
import { clusterWithImagesUnavailable, startClusterWithImages, type ClusterWithImages } from '../services/kube-node.ts';
import { CHART, LOCAL_VALUES } from './render.ts';

const why = clusterWithImagesUnavailable();
const available = requireService('Kubernetes node (kubelet, containerd, Docker engine)', why === undefined, why ?? '');

const NS = 'rt-system';
let cluster: ClusterWithImages | undefined;
let kube: KubeCluster | undefined;
beforeAll(async () => {
  if (!available) return;
  cluster = await startClusterWithImages((l) => console.log(`[cluster] ${l}`));
  kube = cluster.kube;
}, 1_200_000);
afterAll(async () => {
  await cluster?.stop();
}, 180_000);

async function ok(r: Promise<{ code: number; stdout: string; stderr: string }>, what: string): Promise<string> {
  const done = await r;
  if (done.code !== 0) throw new Error(`${what} failed (${done.code}): ${done.stderr}\n${done.stdout}`);
  return done.stdout;
}

/** What the release made that outlives nothing: its TLS Secrets and the webhook's CA bundle. */
async function certificates(k: KubeCluster): Promise<{ secrets: Record<string, Record<string, string>>; caBundle: string }> {
  const secrets: Record<string, Record<string, string>> = {};
  for (const name of ['rt-ca', 'rt-injector-tls', 'rt-operator-tls', 'rt-identity-ca', 'rt-scheduler-tls']) {
    secrets[name] = (JSON.parse(await ok(k.kubectl(['get', 'secret', name, '-n', NS, '-o', 'json']), `get secret ${name}`)) as { data: Record<string, string> }).data;
  }
  const webhook = JSON.parse(await ok(k.kubectl(['get', 'mutatingwebhookconfiguration', 'rt-injector', '-o', 'json']), 'get webhook')) as { webhooks: Array<{ clientConfig: { caBundle: string } }> };
  return { secrets, caBundle: webhook.webhooks[0].clientConfig.caBundle };
}

interface PodList {
  items: Array<{ metadata: { name: string; labels?: Record<string, string> }; status?: { phase?: string; conditions?: Array<{ type: string; status: string }> } }>;
}

/** The sidecar the injector adds, seen through a server-side dry run (the API server calls the webhook; nothing is stored). */
async function injectedContainers(k: KubeCluster, ns: string): Promise<string[]> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'probe', namespace: ns, annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': 'probe' } },
    spec: { containers: [{ name: 'app', image: 'rt:dev', imagePullPolicy: 'Never' }] },
  };
  const out = await ok(k.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: JSON.stringify(pod) }), 'dry-run pod');
  const spec = (JSON.parse(out) as { spec: { initContainers?: Array<{ name: string }>; containers: Array<{ name: string }> } }).spec;
  return [...(spec.initContainers ?? []), ...spec.containers].map((c) => c.name);
}

describe.skipIf(!available)('helm install, upgrade and uninstall of charts/rt on a real node', () => {
  it('installs with e2e/values-local.yaml, injects, keeps its certificate across an upgrade, and uninstalls without a trace', { timeout: 900_000 }, async () => {
    const k = kube!;
    const installed = await k.helm(['install', 'rt', CHART, '--namespace', NS, '--create-namespace', '-f', LOCAL_VALUES, '--wait', '--timeout', '4m']);
    if (installed.code !== 0) {
      const pods = await k.kubectl(['get', 'pods', '-n', NS, '-o', 'wide']);
      const events = await k.kubectl(['get', 'events', '-n', NS]);
      throw new Error(`helm install failed: ${installed.stderr}\n${pods.stdout}\n${events.stdout}`);
    }

    // the CRDs are established
    await ok(k.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/components.rt.io', 'crd/configurations.rt.io', 'crd/subscriptions.rt.io', 'crd/httpendpoints.rt.io', 'crd/resiliencies.rt.io']), 'wait for CRDs');
    // the operator, injector, placement and scheduler pods are Ready on the node
    const pods = JSON.parse(await ok(k.kubectl(['get', 'pods', '-n', NS, '-o', 'json']), 'get pods')) as PodList;
    const ready = pods.items.map((p) => [p.metadata.labels?.['app.kubernetes.io/component'], p.status?.conditions?.find((c) => c.type === 'Ready')?.status]);
    // two injectors by default (a PodDisruptionBudget keeps one through a drain)
    expect(ready.sort()).toEqual([['injector', 'True'], ['injector', 'True'], ['operator', 'True'], ['placement', 'True'], ['scheduler', 'True']]);
    expect((await ok(k.kubectl(['get', 'poddisruptionbudgets', '-n', NS, '-o', 'name']), 'get pdb')).trim()).toBe('poddisruptionbudget.policy/rt-injector');

    // the API server reaches the injector through its Service and the pod comes back with the sidecar
    await k.createNamespace('chart-app');
    expect(await injectedContainers(k, 'chart-app')).toEqual(['rt-sidecar', 'app']);

    // Subscriptions: the operator's conversion webhook turns v1alpha1 (route) and v2alpha1 (routes) into each other
    const sub = (version: string, name: string, spec: Record<string, unknown>) => JSON.stringify({ apiVersion: `rt.io/${version}`, kind: 'Subscription', metadata: { name, namespace: 'chart-app' }, spec: { pubsubname: 'bus', topic: 'orders', ...spec } });
    const get = async (version: string, name: string) => (JSON.parse(await ok(k.kubectl(['get', `subscriptions.${version}.rt.io`, name, '-n', 'chart-app', '-o', 'json']), `get ${version}`)) as { spec: Record<string, unknown> }).spec;
    await vi.waitFor(async () => ok(k.kubectl(['apply', '-f', '-'], { input: sub('v1alpha1', 'old-style', { route: '/orders' }) }), 'apply v1alpha1'), { timeout: 60_000, interval: 1000 });
    expect(await get('v2alpha1', 'old-style')).toMatchObject({ routes: { default: '/orders' } });
    expect(await get('v1alpha1', 'old-style')).toMatchObject({ route: '/orders' });
    const routes = { rules: [{ match: 'event.type == "big"', path: '/big' }], default: '/all' };
    await ok(k.kubectl(['apply', '-f', '-'], { input: sub('v2alpha1', 'new-style', { routes }) }), 'apply v2alpha1');
    expect(await get('v1alpha1', 'new-style')).toMatchObject({ route: '/all' });
    expect(await get('v2alpha1', 'new-style')).toMatchObject({ routes });

    const before = await certificates(k);
    expect(Buffer.from(before.caBundle, 'base64').toString()).toBe(Buffer.from(before.secrets['rt-ca']['tls.crt'], 'base64').toString());

    const upgraded = await k.helm(['upgrade', 'rt', CHART, '--namespace', NS, '-f', LOCAL_VALUES, '--set', 'logLevel=debug', '--wait', '--timeout', '4m']);
    expect(upgraded.code, upgraded.stderr).toBe(0);
    const after = await certificates(k);
    expect(after).toEqual(before);
    expect(await injectedContainers(k, 'chart-app')).toEqual(['rt-sidecar', 'app']);

    const uninstalled = await k.helm(['uninstall', 'rt', '--namespace', NS, '--wait', '--timeout', '2m']);
    expect(uninstalled.code, uninstalled.stderr).toBe(0);
    // nothing of the release is left, in its namespace or cluster-wide
    // (the pods stop on SIGTERM: their deletion is still under way when helm returns)
    await vi.waitFor(async () => {
      const left = await ok(k.kubectl(['get', 'all,secrets,serviceaccounts,configmaps,roles,rolebindings,persistentvolumeclaims,poddisruptionbudgets', '-n', NS, '-o', 'name']), 'get namespaced');
      expect(left.split('\n').filter((l) => l && !/^(serviceaccount\/default|configmap\/kube-root-ca\.crt)$/.test(l))).toEqual([]);
    }, { timeout: 60_000, interval: 500 });
    // the kubelet's garbage collection removes a deleted pod's containers (it runs once a minute)
    await vi.waitFor(async () => expect((await k.node!.ctr(['containers', 'list', '-q'])).stdout.trim()).toBe(''), { timeout: 90_000, interval: 1000 });
    const cluster = await ok(k.kubectl(['get', 'crd,clusterroles,clusterrolebindings,mutatingwebhookconfigurations', '-l', 'app.kubernetes.io/instance=rt', '-o', 'name']), 'get cluster-scoped');
    expect(cluster.trim()).toBe('');
    const crds = await ok(k.kubectl(['get', 'crd', '-o', 'name']), 'get crds');
    expect(crds).not.toMatch(/rt\.io/);
    // without the webhook, an annotated pod is left as it is
    expect(await injectedContainers(k, 'chart-app')).toEqual(['app']);
    await k.kubectl(['delete', 'namespace', 'chart-app', '--wait=false']);
  });
});
