/**
 * `rt operator` against the real kube-apiserver: Component status conditions, the resources served
 * to sidecars (scopes, Kubernetes secrets and their rotation), identity refusals, and watches that
 * survive an API server restart.
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable } from '../services/kube.ts';
import pino from 'pino';
import { KubeClient } from '../../shared/kube/client.ts';
import { loadKubeconfig } from '../../shared/kube/config.ts';
import { type KubeObject, Watched } from '../../shared/kube/watched.ts';
import { parseResources } from '../../sidecar/src/resources/loader.ts';
import { component, type OperatorBed, restartApiServer, startOperatorBed, watchAs } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');

describe.skipIf(!available)('rt operator on a real kube-apiserver', () => {
  let bed: OperatorBed;

  beforeAll(async () => {
    bed = await startOperatorBed();
  }, 180_000);

  afterAll(async () => {
    await bed?.stop();
  });

  const ready = async (ns: string, name: string) => {
    const o = JSON.parse(await bed.kubectl(['get', 'components.rt.io', name, '-n', ns, '-o', 'json']));
    const c = (o.status?.conditions ?? []).find((x: { type: string }) => x.type === 'Ready');
    return { generation: o.metadata.generation as number, observedGeneration: o.status?.observedGeneration as number | undefined, ...c } as {
      generation: number;
      observedGeneration?: number;
      status?: string;
      reason?: string;
      message?: string;
    };
  };

  it('sets Ready True, or False with reason Invalid and a message naming the field, with observedGeneration', async () => {
    const ns = 'status';
    await bed.namespace(ns);
    await bed.apply(
      component(ns, 'good', 'state.redis', [{ name: 'redisHost', value: 'localhost:6379' }]),
      component(ns, 'no-host', 'state.redis', [{ name: 'redisDB', value: '1' }]),
      component(ns, 'unknown', 'lock.nope', []),
      component(ns, 'plug', 'state.my-plugin', []),
    );
    await vi.waitFor(async () => expect(await ready(ns, 'good')).toMatchObject({ status: 'True', reason: 'Valid', observedGeneration: 1 }), { timeout: 15_000 });
    await vi.waitFor(async () => expect(await ready(ns, 'no-host')).toMatchObject({ status: 'False', reason: 'Invalid', observedGeneration: 1 }), { timeout: 15_000 });
    expect((await ready(ns, 'no-host')).message).toMatch(/spec\.metadata: metadata field "redisHost" is required/);
    await vi.waitFor(async () => expect(await ready(ns, 'unknown')).toMatchObject({ status: 'False', reason: 'Invalid' }), { timeout: 15_000 });
    expect((await ready(ns, 'unknown')).message).toMatch(/spec\.type: unknown type "lock\.nope"/);
    await vi.waitFor(async () => expect(await ready(ns, 'plug')).toMatchObject({ status: 'True', reason: 'Pluggable' }), { timeout: 15_000 });

    // fixed: a new generation, observed
    await bed.apply(component(ns, 'no-host', 'state.redis', [{ name: 'redisHost', value: 'h:6379' }]));
    await vi.waitFor(async () => expect(await ready(ns, 'no-host')).toMatchObject({ status: 'True', generation: 2, observedGeneration: 2 }), { timeout: 15_000 });
    // printer columns show it
    expect(await bed.kubectl(['get', 'components.rt.io', '-n', ns])).toMatch(/no-host\s+state\.redis\s+True/);
  });

  it('serves a sidecar its namespace resources filtered by scopes, Kubernetes secrets resolved, and follows rotation', async () => {
    const ns = 'serve';
    await bed.namespace(ns);
    await bed.apply(
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'redis', namespace: ns }, stringData: { password: 'first-pass' } },
      component(ns, 'everyone', 'state.in-memory', []),
      component(ns, 'mine', 'state.redis', [{ name: 'redisHost', value: 'h:1' }, { name: 'redisPassword', secretKeyRef: { name: 'redis', key: 'password' } }], { scopes: ['orders'] }),
      component(ns, 'theirs', 'state.in-memory', [], { scopes: ['billing'] }),
      { apiVersion: 'rt.io/v2alpha1', kind: 'Subscription', metadata: { name: 'sub', namespace: ns }, spec: { pubsubname: 'ps', topic: 't', routes: { default: '/t' } }, scopes: ['orders'] },
      { apiVersion: 'rt.io/v1alpha1', kind: 'HTTPEndpoint', metadata: { name: 'api', namespace: ns }, spec: { baseUrl: 'https://example.invalid' } },
      // the ecosystem's group is read too
      { apiVersion: 'dapr.io/v1alpha1', kind: 'Component', metadata: { name: 'legacy', namespace: ns }, spec: { type: 'state.in-memory', version: 'v1', metadata: [] } },
    );
    const token = readFileSync(await bed.identity(ns, 'orders-pod', 'orders'), 'utf8');
    const w = watchAs(bed, token);
    try {
      await vi.waitFor(() => expect([...w.latest().keys()].sort()).toEqual(['Component/everyone', 'Component/legacy', 'Component/mine', 'HTTPEndpoint/api', 'Subscription/sub']), { timeout: 15_000 });
      expect(w.snapshots.at(-1)!.appId).toBe('orders');
      expect(w.latest().get('Component/legacy')?.apiVersion).toBe('dapr.io/v1alpha1');
      const mine = w.latest().get('Component/mine') as { spec: { metadata: { name: string; value?: string; secretKeyRef?: unknown }[] }; metadata: { annotations: Record<string, string> } };
      expect(mine.spec.metadata).toContainEqual({ name: 'redisPassword', value: 'first-pass' });
      expect(mine.metadata.annotations['rt.io/resolved-secrets']).toBe('redisPassword');

      // rotation: the Secret changes, the sidecar gets the new value
      await bed.apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'redis', namespace: ns }, stringData: { password: 'second-pass' } });
      await vi.waitFor(() => expect((w.latest().get('Component/mine') as typeof mine).spec.metadata).toContainEqual({ name: 'redisPassword', value: 'second-pass' }), { timeout: 15_000 });

      // a component scoped to the app later appears; one removed disappears
      await bed.apply(component(ns, 'theirs', 'state.in-memory', [], { scopes: ['billing', 'orders'] }));
      await vi.waitFor(() => expect(w.latest().has('Component/theirs')).toBe(true), { timeout: 15_000 });
      await bed.kubectl(['delete', 'components.rt.io', 'everyone', '-n', ns]);
      await vi.waitFor(() => expect(w.latest().has('Component/everyone')).toBe(false), { timeout: 15_000 });
    } finally {
      w.close();
    }
  });

  it('serves a dapr.io v1alpha1 Subscription (stored through a CRD without conversion) so that the sidecar reads its route', async () => {
    const ns = 'legacy-subs';
    await bed.namespace(ns);
    await bed.apply({ apiVersion: 'dapr.io/v1alpha1', kind: 'Subscription', metadata: { name: 'old', namespace: ns }, spec: { pubsubname: 'bus', topic: 'orders', route: '/orders' } });
    const token = readFileSync(await bed.identity(ns, 'app-pod', 'app'), 'utf8');
    const w = watchAs(bed, token);
    try {
      await vi.waitFor(() => expect(w.latest().has('Subscription/old')).toBe(true), { timeout: 15_000 });
      const raw = w.snapshots.at(-1)!.resources.find((r) => r.kind === 'Subscription')!;
      const parsed = parseResources(Buffer.from(raw.json).toString('utf8'), 'operator Subscription/old', { appId: 'app', namespace: ns });
      expect(parsed.subscriptions).toEqual([expect.objectContaining({ pubsubname: 'bus', topic: 'orders', rules: [{ match: '', path: '/orders' }] })]);
    } finally {
      w.close();
    }
  });

  it('refuses a forged token, a token for another audience, another namespace and another app id', async () => {
    const ns = 'idn';
    await bed.namespace(ns);
    await bed.namespace('idn-other');
    const token = readFileSync(await bed.identity(ns, 'app-pod', 'app'), 'utf8');
    const refusal = async (t: string, req: { namespace?: string; appId?: string } = {}) => {
      const w = watchAs(bed, t, req);
      try {
        await vi.waitFor(() => expect(w.error()).toBeDefined(), { timeout: 15_000 });
        expect(w.snapshots).toEqual([]);
        return w.error()!;
      } finally {
        w.close();
      }
    };
    // forged: a well-formed JWT signed by nobody the API server trusts
    const [h, p] = token.split('.');
    const forged = `${h}.${p}.${Buffer.from('not-the-signature').toString('base64url')}`;
    expect(await refusal(forged)).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect(await refusal('')).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    const otherAudience = readFileSync(await bed.identity(ns, 'aud-pod', 'app', { audience: 'https://kubernetes.default.svc.cluster.local' }), 'utf8');
    expect((await refusal(otherAudience)).details).toMatch(/token refused|audience/);
    const e1 = await refusal(token, { namespace: 'idn-other' });
    expect(e1.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(e1.details).toMatch(/namespace "idn-other" is not the namespace of its token \(idn\)/);
    const e2 = await refusal(token, { namespace: ns, appId: 'payments' });
    expect(e2.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(e2.details).toMatch(/app id "payments" is not the rt\.io\/app-id of its pod idn\/app-pod \("app"\)/);
    // a token whose pod is gone is refused too
    const gone = readFileSync(await bed.identity(ns, 'gone-pod', 'app'), 'utf8');
    await bed.kubectl(['delete', 'pod', 'gone-pod', '-n', ns, '--wait=false']);
    expect(await refusal(gone)).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    // the genuine token with matching claims is served
    const ok = watchAs(bed, token, { namespace: ns, appId: 'app' });
    try {
      await vi.waitFor(() => expect(ok.snapshots.length).toBe(1), { timeout: 15_000 });
    } finally {
      ok.close();
    }
  });

  it('keeps watching across a kube-apiserver restart', async () => {
    const ns = 'restart';
    await bed.namespace(ns);
    const token = readFileSync(await bed.identity(ns, 'r-pod', 'r'), 'utf8');
    const w = watchAs(bed, token);
    try {
      await bed.apply(component(ns, 'before', 'state.in-memory', []));
      await vi.waitFor(() => expect(w.latest().has('Component/before')).toBe(true), { timeout: 15_000 });

      // stop the API server and start it again with the same flags (etcd keeps the data)
      await restartApiServer(bed);

      await bed.apply(component(ns, 'after', 'state.redis', [{ name: 'redisHost', value: 'x:1' }]));
      await vi.waitFor(() => expect(w.latest().has('Component/after')).toBe(true), { timeout: 30_000 });
      await vi.waitFor(async () => expect(await ready(ns, 'after')).toMatchObject({ status: 'True', observedGeneration: 1 }), { timeout: 30_000 });
    } finally {
      w.close();
    }
  }, 150_000);

  it('relists after 410 Gone: an object deleted while its watch was away (history compacted) is seen deleted', async () => {
    const ns = 'gone';
    await bed.namespace(ns);
    const cm = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, labels: { t: 'gone' } } });
    await bed.apply(cm('keep'), cm('lost'));
    const logs: string[] = [];
    const events: string[] = [];
    const client = new KubeClient(loadKubeconfig(bed.kube.kubeconfig));
    const w = new Watched<KubeObject>(client, 'configmaps', `/api/v1/namespaces/${ns}/configmaps`, pino({ level: 'info' }, { write: (l: string) => void logs.push(l) }), (t, o) => events.push(`${t} ${o.metadata?.name}`), {
      labelSelector: 't=gone',
    });
    try {
      w.start();
      await w.whenSynced();
      expect(events.sort()).toEqual(['add keep', 'add lost']);
      // while the API server is down: "lost" goes (straight from etcd), and etcd compacts its history
      await restartApiServer(bed, async () => {
        const etcd = `http://${bed.kube.controlPlane.etcd.endpoints[0]}`;
        const call = async (path: string, body: object) => (await (await fetch(`${etcd}/v3/kv/${path}`, { method: 'POST', body: JSON.stringify(body) })).json()) as { header: { revision: string }; deleted?: string };
        const b64 = (s: string) => Buffer.from(s).toString('base64');
        expect((await call('deleterange', { key: b64(`/registry/configmaps/${ns}/lost`) })).deleted).toBe('1');
        const { header } = await call('put', { key: b64('/rt-test/tick'), value: b64('1') });
        await call('compaction', { revision: header.revision, physical: true });
      });
      await vi.waitFor(() => expect(events).toContain('delete lost'), { timeout: 60_000 });
      expect(w.list().map((o) => o.metadata?.name)).toEqual(['keep']);
      expect(logs.join('')).toMatch(/watch of configmaps: resourceVersion \d+ expired \((410 Gone|410 in the stream)\): listing again/);
    } finally {
      await w.stop();
      client.close();
    }
  }, 150_000);
});
