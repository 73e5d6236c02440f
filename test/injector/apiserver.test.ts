/**
 * The real kube-apiserver calls `rt injector`: a MutatingWebhookConfiguration with a loopback
 * `url` and `caBundle`, `kubectl apply` of Pods and a Deployment (the controller manager makes
 * its pods), and the stored Pods carry every injected part. Selectors, reinvocation, refusals and
 * failurePolicy Ignore with the injector down are covered too. Pods are stored, not run.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startInjector, type RunningInjector } from '../../injector/src/main.ts';
import type { Container, Pod } from '../../injector/src/pod.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, startKube, type KubeCluster } from '../services/kube.ts';
import { arg, envOf } from './fixtures.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');
const CRD = join(import.meta.dirname, '../../crds/components.yaml');

let kube: KubeCluster;
let ca: TestCa;
let dir: string;
let injector: RunningInjector | undefined;
/** The outcome of every admission the injector answered (from its debug log). */
const outcomes: string[] = [];

const ok = async (p: Promise<{ code: number; stdout: string; stderr: string }>) => {
  const r = await p;
  if (r.code !== 0) throw new Error(`kubectl failed (${r.code}): ${r.stderr}`);
  return r;
};

function webhook(name: string, port: number, namespaceLabel: string, failurePolicy: 'Fail' | 'Ignore') {
  return {
    name,
    clientConfig: { url: `https://127.0.0.1:${port}/mutate`, caBundle: Buffer.from(ca.caPem).toString('base64') },
    rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
    namespaceSelector: { matchLabels: { 'rt-test/injection': namespaceLabel } },
    objectSelector: { matchExpressions: [{ key: 'rt.io/sidecar-injection', operator: 'NotIn', values: ['disabled'] }] },
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    failurePolicy,
    reinvocationPolicy: 'IfNeeded',
    timeoutSeconds: 10,
  };
}

beforeAll(async () => {
  if (!available) return;
  kube = await startKube();
  ca = makeTestCa();
  dir = mkdtempSync(join(tmpdir(), 'rt-injector-kube-'));
  writeFileSync(join(dir, 'tls.crt'), ca.cert);
  writeFileSync(join(dir, 'tls.key'), ca.key);
  injector = await startInjector(
    {
      port: 0,
      listenAddress: '127.0.0.1',
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      kubeconfig: kube.kubeconfig,
      logLevel: 'warn',
      // any PEM will do as the operator's CA: the API server must accept its downward-API projection
      settings: { sidecarImage: 'rt:dev', controlPlaneAddress: 'rt-operator.rt-system.svc:6500', nativeSidecar: true, operatorCaPem: ca.caPem },
    },
    pino({ level: 'debug' }, { write: (line: string) => void outcomes.push(...(/"msg":"admission (\w+)"/.exec(line)?.slice(1) ?? [])) }),
  );
  // started before the CRD exists (as when the chart installs both at once): the Components
  // cannot be listed yet, so the injector is not ready, and its informer retries with backoff
  const agent = new Agent({ connect: { ca: ca.caPem } });
  const healthz = () => fetch(`https://127.0.0.1:${injector!.server.port}/healthz`, { dispatcher: agent }).then((r) => r.status);
  expect(injector.components.synced).toBe(false);
  expect(await healthz()).toBe(503);
  await ok(kube.kubectl(['apply', '-f', CRD]));
  await ok(kube.kubectl(['wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/components.rt.io']));
  await vi.waitFor(() => expect(injector!.components.synced).toBe(true), { timeout: 30_000, interval: 100 });
  expect(await healthz()).toBe(200);
  await agent.close();
  const port = injector.server.port;
  await ok(
    kube.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingWebhookConfiguration',
            metadata: { name: 'rt-injector' },
            // two webhooks on the same injector: the second sees the first one's result (reinvocation)
            webhooks: [webhook('sidecar.rt.io', port, 'enabled', 'Fail'), webhook('again.sidecar.rt.io', port, 'enabled', 'Fail')],
          },
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingWebhookConfiguration',
            metadata: { name: 'rt-injector-ignore' },
            webhooks: [webhook('ignore.sidecar.rt.io', port, 'ignore', 'Ignore')],
          },
        ],
      }),
    }),
  );
}, 600_000);

afterAll(async () => {
  await injector?.close();
  await kube?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  ca?.remove();
});

async function namespace(name: string, injection?: string): Promise<void> {
  await kube.createNamespace(name);
  if (injection) await ok(kube.kubectl(['label', 'namespace', name, `rt-test/injection=${injection}`]));
}

async function getPod(ns: string, name: string): Promise<Pod> {
  return JSON.parse((await ok(kube.kubectl(['get', 'pod', name, '-o', 'json'], { namespace: ns }))).stdout) as Pod;
}

const podManifest = (name: string, annotations: Record<string, string>, extra: { labels?: Record<string, string>; containers?: Container[] } = {}) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations: { 'rt.io/enabled': 'true', ...annotations }, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: { containers: extra.containers ?? [{ name: 'app', image: 'app:1' }] },
  });

const componentManifest = (name: string, container: string, scopes?: string[]) =>
  JSON.stringify({
    apiVersion: 'rt.io/v1alpha1',
    kind: 'Component',
    metadata: { name, annotations: { 'rt.io/component-container': container } },
    spec: { type: `state.${name}`, version: 'v1', metadata: [] },
    ...(scopes ? { scopes } : {}),
  });

/** Components reach the injector's cache through its watch. */
async function applyComponents(ns: string, manifests: string[]): Promise<void> {
  for (const m of manifests) await ok(kube.kubectl(['apply', '-f', '-'], { input: m, namespace: ns }));
  await vi.waitFor(() => expect(injector!.components.list(ns)).toHaveLength(manifests.length), { timeout: 10_000, interval: 50 });
}

const names = (cs: Container[] | undefined) => (cs ?? []).map((c) => c.name);

describe.skipIf(!available)('rt injector called by the real kube-apiserver', () => {
  it('a kubectl-applied Pod is stored with the sidecar, its component containers and volumes (native sidecars)', async () => {
    await namespace('inj-pod', 'enabled');
    await applyComponents('inj-pod', [
      componentManifest('store', JSON.stringify({ name: 'store', image: 'store:1' }), ['orders']),
      componentManifest('elsewhere', JSON.stringify({ name: 'elsewhere', image: 'e:1' }), ['billing']),
    ]);
    const seen = outcomes.length;
    const r = await ok(kube.kubectl(['apply', '-f', '-'], {
      namespace: 'inj-pod',
      input: podManifest('orders', { 'rt.io/app-id': 'orders', 'rt.io/app-port': '8080', 'rt.io/inject-pluggable-components': 'true', 'dapr.io/log-level': 'debug' }),
    }));
    // the unscoped Component's warning reaches the user through kubectl
    expect(r.stderr).toMatch(/Warning: Component inj-pod\/elsewhere has rt\.io\/component-container but is not scoped/);
    const p = await getPod('inj-pod', 'orders');
    expect(names(p.spec.initContainers)).toEqual(['store', 'rt-sidecar']);
    expect(names(p.spec.containers)).toEqual(['app']);
    const [store, sidecar] = p.spec.initContainers!;
    expect(store.restartPolicy).toBe('Always');
    expect(store.startupProbe).toBeUndefined();
    expect(arg(sidecar, 'wait-for-sockets')).toBe('store');
    expect(sidecar.restartPolicy).toBe('Always');
    expect(sidecar.image).toBe('rt:dev');
    expect(sidecar.args?.slice(0, 3)).toEqual(['sidecar', '--mode', 'kubernetes']);
    expect(arg(sidecar, 'app-id')).toBe('orders');
    expect(arg(sidecar, 'app-port')).toBe('8080');
    expect(arg(sidecar, 'log-level')).toBe('debug');
    expect(sidecar.startupProbe?.httpGet?.path).toBe('/v1.0/healthz');
    expect(envOf(sidecar, 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(envOf(sidecar, 'RT_COMPONENTS_SOCKETS_FOLDER')?.value).toBe('/tmp/rt-components-sockets');
    expect(envOf(p.spec.containers[0], 'RT_HTTP_PORT')?.value).toBe('3500');
    expect(envOf(p.spec.containers[0], 'DAPR_GRPC_PORT')?.value).toBe('50001');
    const vols = new Map((p.spec.volumes ?? []).map((v) => [v.name, v]));
    expect(vols.get('rt-identity-token')?.projected?.sources?.[0]?.serviceAccountToken).toMatchObject({ audience: 'rt.io/operator', path: 'token' });
    expect(vols.get('rt-components-sockets')?.emptyDir).toEqual({});
    expect(p.metadata?.annotations?.['rt.io/app-id']).toBe('orders');
    expect(p.metadata?.annotations?.['rt.io/operator-ca']).toBe(ca.caPem);
    expect(vols.get('rt-identity-token')?.projected?.sources?.[1]?.downwardAPI?.items?.[0]).toMatchObject({ path: 'ca.crt', fieldRef: { fieldPath: "metadata.annotations['rt.io/operator-ca']" } });
    expect(envOf(sidecar, 'RT_OPERATOR_CA_FILE')?.value).toBe('/var/run/secrets/rt.io/ca.crt');
    // reinvocation: the second webhook (and the API server's reinvocation pass) got the injected
    // pod, and every later call left it as it was
    const calls = outcomes.slice(seen);
    expect(calls[0]).toBe('injected');
    expect(calls.length).toBeGreaterThan(1);
    expect(new Set(calls.slice(1))).toEqual(new Set(['skipped']));
    expect(p.spec.initContainers!.filter((c) => c.name === 'rt-sidecar')).toHaveLength(1);
    expect([...vols.keys()].filter((n) => n.startsWith('rt-'))).toEqual(['rt-identity-token', 'rt-components-sockets']);
  });

  it("a Deployment's pods (made by the controller manager from its template) are injected, app id = the Deployment", async () => {
    await namespace('inj-deploy', 'enabled');
    await ok(kube.kubectl(['apply', '-f', '-'], {
      namespace: 'inj-deploy',
      input: JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'checkout' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'checkout' } },
          template: {
            metadata: { labels: { app: 'checkout' }, annotations: { 'rt.io/enabled': 'true', 'rt.io/native-sidecar': 'false', 'rt.io/sidecar-cpu-request': '50m' } },
            spec: { containers: [{ name: 'app', image: 'checkout:1' }] },
          },
        },
      }),
    }));
    const pods = await vi.waitFor(
      async () => {
        const list = JSON.parse((await ok(kube.kubectl(['get', 'pods', '-l', 'app=checkout', '-o', 'json'], { namespace: 'inj-deploy' }))).stdout) as { items: Pod[] };
        expect(list.items.length).toBeGreaterThan(0);
        return list.items;
      },
      { timeout: 60_000, interval: 250 },
    );
    const p = pods[0];
    // classic mode: the sidecar is the last container
    expect(names(p.spec.containers)).toEqual(['app', 'rt-sidecar']);
    const sidecar = p.spec.containers[1];
    expect(arg(sidecar, 'app-id')).toBe('checkout');
    expect(sidecar.resources?.requests?.cpu).toBe('50m');
    expect(p.metadata?.annotations?.['rt.io/app-id']).toBe('checkout');
  });

  it('classic mode with listed component containers: the runtime waits for their sockets', async () => {
    await namespace('inj-classic', 'enabled');
    await ok(kube.kubectl(['apply', '-f', '-'], {
      namespace: 'inj-classic',
      input: podManifest('classic', { 'rt.io/native-sidecar': 'false', 'rt.io/pluggable-components': 'my-store' }, {
        containers: [{ name: 'app', image: 'a:1' }, { name: 'my-store', image: 's:1' }],
      }),
    }));
    const p = await getPod('inj-classic', 'classic');
    expect(names(p.spec.containers)).toEqual(['app', 'my-store', 'rt-sidecar']);
    expect(arg(p.spec.containers[2], 'wait-for-sockets')).toBe('my-store');
    expect(p.spec.containers[1].volumeMounts?.some((m) => m.name === 'rt-components-sockets')).toBe(true);
  });

  it('namespace and object selectors: pods outside them are stored unchanged', async () => {
    await namespace('inj-off');
    await ok(kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-off', input: podManifest('plain', {}) }));
    expect(names((await getPod('inj-off', 'plain')).spec.containers)).toEqual(['app']);

    await namespace('inj-objsel', 'enabled');
    await ok(kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-objsel', input: podManifest('optout', {}, { labels: { 'rt.io/sidecar-injection': 'disabled' } }) }));
    const p = await getPod('inj-objsel', 'optout');
    expect(names(p.spec.containers)).toEqual(['app']);
    expect(p.spec.initContainers).toBeUndefined();
  });

  it('a pod that already has rt-sidecar is stored as written', async () => {
    await namespace('inj-manual', 'enabled');
    await ok(kube.kubectl(['apply', '-f', '-'], {
      namespace: 'inj-manual',
      input: podManifest('manual', {}, { containers: [{ name: 'app', image: 'a:1' }, { name: 'rt-sidecar', image: 'mine:1' }] }),
    }));
    const p = await getPod('inj-manual', 'manual');
    expect(p.spec.containers.map((c) => [c.name, c.image])).toEqual([['app', 'a:1'], ['rt-sidecar', 'mine:1']]);
    expect(p.spec.volumes?.some((v) => v.name === 'rt-identity-token')).toBe(false);
  });

  it('kubectl apply is refused with the reason: a bad annotation, a Component whose container JSON is invalid', async () => {
    await namespace('inj-bad', 'enabled');
    const bad = await kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-bad', input: podManifest('badport', { 'rt.io/app-port': 'eighty' }) });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/denied the request: rt injector: annotation rt\.io\/app-port: "eighty" is not valid/);

    await applyComponents('inj-bad', [componentManifest('broken', '{"name": "broken"')]);
    const r = await kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-bad', input: podManifest('withbroken', { 'rt.io/inject-pluggable-components': 'true' }) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Component inj-bad\/broken: annotation rt\.io\/component-container is not valid JSON/);
    expect((await kube.kubectl(['get', 'pod', 'withbroken'], { namespace: 'inj-bad' })).code).not.toBe(0);
  });

  it('with the injector down: failurePolicy Ignore stores the pod without a sidecar, Fail refuses it', async () => {
    await namespace('inj-down-ignore', 'ignore');
    await namespace('inj-down-fail', 'enabled');
    await injector!.close();
    injector = undefined;
    await ok(kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-down-ignore', input: podManifest('missed', {}) }));
    const p = await getPod('inj-down-ignore', 'missed');
    // what the operator's watchdog looks for: enabled, yet no rt-sidecar anywhere
    expect(p.metadata?.annotations?.['rt.io/enabled']).toBe('true');
    expect(names([...(p.spec.initContainers ?? []), ...p.spec.containers])).toEqual(['app']);
    const refused = await kube.kubectl(['apply', '-f', '-'], { namespace: 'inj-down-fail', input: podManifest('refused', {}) });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/failed calling webhook "sidecar\.rt\.io"/);
  });
});
