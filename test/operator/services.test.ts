/**
 * The headless Services of service invocation (`<app-id>-rt`), on a real kube-apiserver: created
 * when an annotated, labelled pod appears, updated when the newest pod's sidecar ports change,
 * put back after a hand edit or deletion, left alone when someone else owns the name, and removed
 * with the last pod — also when that pod went while the operator was down. With two replicas,
 * only the holder of the leader Lease writes, both serve sidecars, and the other takes over.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Operator } from '../../operator/src/operator.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable } from '../services/kube.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { component, type OperatorBed, startOperatorBed, watchAs } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');

interface Svc {
  metadata: { name: string; labels?: Record<string, string>; uid: string };
  spec: { clusterIP: string; selector: Record<string, string>; ports: { name: string; port: number; targetPort: number }[] };
}

describe.skipIf(!available)('rt operator keeps headless Services for annotated pods', () => {
  let bed: OperatorBed;
  const ns = 'invoke';

  beforeAll(async () => {
    bed = await startOperatorBed();
    await bed.namespace(ns);
  }, 180_000);

  afterAll(async () => {
    await bed?.stop();
  });

  /** A pod as the injector leaves it: annotated, labelled with its app id, with the rt-sidecar container. */
  const pod = (name: string, appId: string, annotations: Record<string, string> = {}, prefix = 'rt.io') => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: ns,
      labels: { 'rt.io/app-id': appId } as Record<string, string>,
      annotations: { [`${prefix}/enabled`]: 'true', 'rt.io/app-id': appId, ...annotations } as Record<string, string>,
    },
    spec: { containers: [{ name: 'app', image: 'app:1' }, { name: 'rt-sidecar', image: 'rt:1' }] },
  });
  const service = async (name: string): Promise<Svc | undefined> => {
    const r = await bed.kube.request('GET', `/api/v1/namespaces/${ns}/services/${name}`);
    return r.status === 404 ? undefined : (r.body as Svc);
  };
  const ports = async (name: string) => Object.fromEntries(((await service(name))?.spec.ports ?? []).map((p) => [p.name, p.port]));
  const deletePod = (name: string) => bed.kubectl(['delete', 'pod', name, '-n', ns, '--wait=false']);

  it('creates <app-id>-rt with the sidecar ports, follows the newest pod, removes it with the last pod', async () => {
    await bed.apply(pod('orders-1', 'orders'));
    await vi.waitFor(async () => expect(await service('orders-rt')).toBeDefined(), { timeout: 15_000 });
    const s = (await service('orders-rt'))!;
    expect(s.spec.clusterIP).toBe('None');
    expect(s.spec.selector).toEqual({ 'rt.io/app-id': 'orders' });
    expect(s.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'rt-operator', 'rt.io/app-id': 'orders' });
    expect(s.spec.ports.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['http', 3500, 3500],
      ['grpc', 50001, 50001],
      ['internal', 50002, 50002],
      ['metrics', 9090, 9090],
    ]);

    // a newer pod with other sidecar ports (a rollout): the Service follows it
    await new Promise((r) => setTimeout(r, 1100)); // creationTimestamp has 1 s resolution
    await bed.apply(pod('orders-2', 'orders', { 'rt.io/sidecar-http-port': '3600', 'rt.io/sidecar-metrics-port': '9091' }));
    await vi.waitFor(async () => expect(await ports('orders-rt')).toEqual({ http: 3600, grpc: 50001, internal: 50002, metrics: 9091 }), { timeout: 15_000 });
    await deletePod('orders-2');
    await vi.waitFor(async () => expect(await ports('orders-rt')).toEqual({ http: 3500, grpc: 50001, internal: 50002, metrics: 9090 }), { timeout: 15_000 });

    // the last pod goes: so does the Service
    await deletePod('orders-1');
    await vi.waitFor(async () => expect(await service('orders-rt')).toBeUndefined(), { timeout: 15_000 });
  });

  it('is level-triggered: a deleted or hand-edited Service is put back; dapr.io/enabled counts too', async () => {
    await bed.apply(pod('cart-1', 'cart', {}, 'dapr.io'));
    await vi.waitFor(async () => expect(await service('cart-rt')).toBeDefined(), { timeout: 15_000 });
    const first = (await service('cart-rt'))!.metadata.uid;

    await bed.kubectl(['delete', 'service', 'cart-rt', '-n', ns]);
    await vi.waitFor(async () => expect((await service('cart-rt'))?.metadata.uid).toBeDefined(), { timeout: 15_000 });
    expect((await service('cart-rt'))!.metadata.uid).not.toBe(first);

    await bed.kubectl(['patch', 'service', 'cart-rt', '-n', ns, '--type', 'merge', '-p', JSON.stringify({ spec: { ports: [{ name: 'http', port: 1234, targetPort: 1234 }] } })]);
    await vi.waitFor(async () => expect(await ports('cart-rt')).toEqual({ http: 3500, grpc: 50001, internal: 50002, metrics: 9090 }), { timeout: 15_000 });

    await deletePod('cart-1');
    await vi.waitFor(async () => expect(await service('cart-rt')).toBeUndefined(), { timeout: 15_000 });
  });

  it('leaves a Service it does not manage alone, and ignores pods that are not annotated or not labelled', async () => {
    await bed.apply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'billing-rt', namespace: ns }, spec: { selector: { app: 'billing' }, ports: [{ name: 'web', port: 80 }] } });
    await bed.apply(pod('billing-1', 'billing'));
    // not annotated (no sidecar wanted), or annotated without the injector's label
    const plain = pod('plain-1', 'plain');
    plain.metadata.annotations = {};
    const unlabelled = pod('unlabelled-1', 'unlabelled');
    unlabelled.metadata.labels = {};
    await bed.apply(plain, unlabelled);
    await bed.operator.idle();
    await new Promise((r) => setTimeout(r, 1000));
    await bed.operator.idle();
    expect((await service('billing-rt'))!.spec.ports).toEqual([expect.objectContaining({ name: 'web', port: 80 })]);
    expect(await service('plain-rt')).toBeUndefined();
    expect(await service('unlabelled-rt')).toBeUndefined();
    await bed.kubectl(['delete', 'pod', 'billing-1', 'plain-1', 'unlabelled-1', '-n', ns, '--wait=false']);
    await bed.kubectl(['delete', 'service', 'billing-rt', '-n', ns]);
  });

  it('removes the Service of an app whose last pod went while the operator was down', async () => {
    await bed.apply(pod('gone-1', 'gone'));
    await vi.waitFor(async () => expect(await service('gone-rt')).toBeDefined(), { timeout: 15_000 });
    await bed.operator.close();
    await deletePod('gone-1');
    const again = new Operator({ kubeconfig: bed.kube.kubeconfig, grpcPort: 0, listenAddress: '127.0.0.1', log: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }) });
    try {
      await again.start();
      await vi.waitFor(async () => expect(await service('gone-rt')).toBeUndefined(), { timeout: 15_000 });
    } finally {
      await again.close();
    }
  });

  it('two replicas: one leader writes, both serve sidecars, the other takes over when the leader stops', async () => {
    const opts = { kubeconfig: bed.kube.kubeconfig, grpcPort: 0, listenAddress: '127.0.0.1', tlsCertFile: join(bed.dir, 'tls.crt'), tlsKeyFile: join(bed.dir, 'tls.key'), log: pino({ level: process.env.RT_TEST_LOG ?? 'silent' }) };
    const first = new Operator(opts);
    const second = new Operator(opts);
    let firstClosed = false;
    try {
      await first.start();
      const port = await second.start();
      expect(first.leader).toBe(true);
      expect(second.leader).toBe(false);
      const lease = (await bed.kube.request('GET', '/apis/coordination.k8s.io/v1/namespaces/default/leases/rt-operator')).body as { spec: { holderIdentity: string } };
      expect(lease.spec.holderIdentity).toMatch(/_[0-9a-f]{8}$/);

      // the follower serves a sidecar too
      const token = readFileSync(await bed.identity(ns, 'id-pod', 'idapp'), 'utf8');
      await bed.apply(component(ns, 'shared', 'state.in-memory', []));
      const w = watchAs({ ...bed, port }, token);
      try {
        await vi.waitFor(() => expect([...w.latest().keys()]).toContain('Component/shared'), { timeout: 15_000 });
      } finally {
        w.close();
      }

      // the leader stops (releasing the Lease): the other replica writes from then on
      await first.close();
      firstClosed = true;
      await vi.waitFor(() => expect(second.leader).toBe(true), { timeout: 15_000 });
      await bed.apply(pod('late-1', 'late'), component(ns, 'later', 'state.redis', []));
      await vi.waitFor(async () => expect(await service('late-rt')).toBeDefined(), { timeout: 15_000 });
      await vi.waitFor(async () => {
        const c = JSON.parse(await bed.kubectl(['get', 'components.rt.io', 'later', '-n', ns, '-o', 'json'])) as { status?: { conditions?: { reason: string }[] } };
        expect(c.status?.conditions?.[0]?.reason).toBe('Invalid');
      }, { timeout: 15_000 });
    } finally {
      if (!firstClosed) await first.close();
      await second.close();
    }
  });
});
