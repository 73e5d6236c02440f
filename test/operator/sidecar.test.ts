/**
 * A real `rt sidecar --mode kubernetes` process fed by `rt operator` on a real kube-apiserver:
 * `kubectl apply` of a changed Component reaches the running sidecar without a restart; an
 * operator that is not there at start is retried and reported; and the watchdog reports (and,
 * when asked, deletes) pods the injector missed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runRt, type RtProcess } from '../../e2e/rt-process.ts';
import { Operator } from '../../operator/src/operator.ts';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable } from '../services/kube.ts';
import { freePort } from '../services/net.ts';
import { component, type OperatorBed, startOperatorBed } from './helpers.ts';

const why = kubeUnavailable();
const available = requireService('Kubernetes control plane', why === undefined, why ?? '');

describe.skipIf(!available)('rt sidecar --mode kubernetes with rt operator', () => {
  let bed: OperatorBed;
  let dataDir: string;
  const sidecars: RtProcess[] = [];

  beforeAll(async () => {
    bed = await startOperatorBed({ watchdogDeleteUninjected: true });
    dataDir = mkdtempSync(join(tmpdir(), 'rt-k8s-sidecar-'));
  }, 180_000);

  afterAll(async () => {
    for (const s of sidecars) await s.stop();
    await bed?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const startSidecar = async (ns: string, pod: string, appId: string, tokenFile: string, address: string, env: NodeJS.ProcessEnv = {}) => {
    const httpPort = await freePort();
    const s = runRt(
      ['sidecar', '--app-id', appId, '--mode', 'kubernetes', '--control-plane-address', address, '--listen-address', '127.0.0.1', '--http-port', String(httpPort), '--grpc-port', '0', '--internal-grpc-port', '0', '--disable-metrics', '--data-dir', dataDir],
      { RT_OPERATOR_TOKEN_FILE: tokenFile, RT_OPERATOR_CA_FILE: bed.ca.caFile, NAMESPACE: ns, POD_NAME: pod, RT_LOG_AS_JSON: 'true', ...env },
    );
    sidecars.push(s);
    const base = `http://127.0.0.1:${httpPort}`;
    // a sidecar that died says why in the test's failure
    void s.exit.then((code) => code !== 0 && code !== null && console.error(`rt sidecar exited with ${code}:\n${s.out().slice(-4000)}`));
    await vi.waitFor(async () => expect((await fetch(`${base}/v1.0/healthz`)).status).toBe(204), { timeout: 30_000, interval: 200 });
    return { s, base };
  };
  const names = async (base: string) => (((await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string }[] }).components ?? []).map((c) => c.name).sort();

  it('starts beside an invalid Component: serves the good one, reports the invalid one with the operator\'s reason, hot-loads it once fixed', async () => {
    const ns = 'one-bad';
    await bed.namespace(ns);
    // unscoped, so in every sidecar's scope: a state store without its connection string
    await bed.apply(component(ns, 'good', 'state.in-memory', []), component(ns, 'typo', 'state.sqlite', []));
    const token = await bed.identity(ns, 'shop-0', 'shop');
    const { s, base } = await startSidecar(ns, 'shop-0', 'shop', token, `127.0.0.1:${bed.port}`);
    await vi.waitFor(async () => expect(await names(base)).toEqual(['good']), { timeout: 15_000 });
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { componentsNotLoaded: Array<{ name: string; type: string; reason: string }> };
    expect(md.componentsNotLoaded).toEqual([{ name: 'typo', type: 'state.sqlite', reason: expect.stringMatching(/^invalid \(Invalid\): .*connectionString/) }]);
    const call = await fetch(`${base}/v1.0/state/typo/k`);
    expect(call.status).toBe(400);
    expect(((await call.json()) as { errorCode: string; message: string })).toMatchObject({ errorCode: 'ERR_STATE_STORE_NOT_FOUND', message: expect.stringContaining('"typo" (state.sqlite) was not loaded: invalid') });
    // said once in the log, not once per snapshot
    await bed.apply(component(ns, 'another', 'state.in-memory', []));
    await vi.waitFor(async () => expect(await names(base)).toEqual(['another', 'good']), { timeout: 15_000 });
    expect(s.out().match(/component not loaded: the operator withheld it/g)).toHaveLength(1);
    // fixed: sent, and hot-loaded
    await bed.apply(component(ns, 'typo', 'state.sqlite', [{ name: 'connectionString', value: join(dataDir, 'typo.db') }]));
    await vi.waitFor(async () => expect(await names(base)).toEqual(['another', 'good', 'typo']), { timeout: 15_000 });
    expect(((await (await fetch(`${base}/v1.0/metadata`)).json()) as { componentsNotLoaded: unknown[] }).componentsNotLoaded).toEqual([]);
    expect((await fetch(`${base}/v1.0/state/typo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: 1 }]) })).status).toBe(204);
  });

  it('applies an add, an update and a removal to the running sidecar, shown in /v1.0/metadata', async () => {
    const ns = 'hot';
    await bed.namespace(ns);
    await bed.apply(component(ns, 'store', 'state.in-memory', []));
    const token = await bed.identity(ns, 'orders-0', 'orders');
    const { s, base } = await startSidecar(ns, 'orders-0', 'orders', token, `127.0.0.1:${bed.port}`);
    await vi.waitFor(async () => expect(await names(base)).toEqual(['store']), { timeout: 15_000 });
    const save = await fetch(`${base}/v1.0/state/store`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: 1 }]) });
    expect(save.status).toBe(204);

    await bed.apply(component(ns, 'extra', 'state.in-memory', []), component(ns, 'other-app', 'state.in-memory', [], { scopes: ['billing'] }));
    await vi.waitFor(async () => expect(await names(base)).toEqual(['extra', 'store']), { timeout: 15_000 });

    await bed.apply(component(ns, 'extra', 'state.sqlite', [{ name: 'connectionString', value: join(dataDir, 'extra.db') }]));
    await vi.waitFor(
      async () => {
        const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { components: { name: string; type: string }[] };
        expect(md.components.find((c) => c.name === 'extra')?.type).toBe('state.sqlite');
      },
      { timeout: 15_000 },
    );
    await bed.kubectl(['delete', 'components.rt.io', 'extra', '-n', ns]);
    await vi.waitFor(async () => expect(await names(base)).toEqual(['store']), { timeout: 15_000 });
    expect(s.out()).not.toMatch(/"level":50/);

    // no actor state store in a pod: said at start, and workflows are refused rather than kept in the pod's filesystem
    expect(s.out()).toMatch(/workflows are refused: no actor state store is configured/);
    const wf = await fetch(`${base}/v1.0-beta1/workflows/rt/order/start?instanceID=i1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(wf.status).toBe(409);
    expect(((await wf.json()) as { message: string }).message).toMatch(/pod's filesystem.*actorStateStore: "true"/);
    // an actor state store added later is reported, not silently taken up under running instances
    await bed.apply(component(ns, 'actors', 'state.sqlite', [{ name: 'connectionString', value: join(dataDir, 'actors.db') }, { name: 'actorStateStore', value: 'true' }]));
    await vi.waitFor(
      async () => expect(((await (await fetch(`${base}/v1.0/metadata`)).json()) as { extended: Record<string, string> }).extended.workflowStateStore).toBe('embedded (actors configured: restart to use it)'),
      { timeout: 15_000 },
    );
  });

  it('serves Resiliency resources: kubectl apply reaches the running sidecar; one scoped to another app does not', async () => {
    const ns = 'resilient';
    await bed.namespace(ns);
    const token = await bed.identity(ns, 'cart-0', 'cart');
    const { s, base } = await startSidecar(ns, 'cart-0', 'cart', token, `127.0.0.1:${bed.port}`);
    const invokePayments = async () => {
      const t0 = performance.now();
      const r = await fetch(`${base}/v1.0/invoke/payments/method/pay`, { method: 'POST', body: '{}' });
      return { status: r.status, ms: performance.now() - t0 };
    };
    const resiliency = (name: string, extra: object = {}) => ({
      apiVersion: 'rt.io/v1alpha1',
      kind: 'Resiliency',
      metadata: { name, namespace: ns },
      ...extra,
      spec: { policies: { timeouts: { general: '5s' }, retries: { few: { policy: 'constant', duration: '1s', maxRetries: 3, matching: { httpStatusCodes: '500-599' } } } }, targets: { apps: { payments: { timeout: 'general', retry: 'few' } } } },
    });
    await bed.apply(resiliency('calls'), resiliency('not-mine', { scopes: ['billing'] }));
    // policies are looked up per call: a call shows they arrived (and the log says which)
    await vi.waitFor(
      async () => {
        await invokePayments();
        expect(s.out()).toMatch(/"resiliency":\["calls"\][^\n]*"msg":"resiliency policies reloaded"/);
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(s.out()).not.toMatch(/not-mine/);
    // payments has no sidecar here: each call fails, and is now tried 4 times, 1 s apart
    const r = await invokePayments();
    expect(r.status).toBe(500);
    expect(r.ms).toBeGreaterThanOrEqual(2900);
    // the API server refuses what the CRD's schema does not allow
    await expect(bed.kubectl(['apply', '-f', '-'], JSON.stringify({ ...resiliency('bad'), spec: { policies: { retries: { r: { policy: 'sometimes' } } } } }))).rejects.toThrow(/Unsupported value: "sometimes"/);
  });

  it('retries an operator that is not there at start, says so in /v1.0/healthz/outbound, and keeps its components when it goes away', async () => {
    const ns = 'late';
    await bed.namespace(ns);
    await bed.apply(component(ns, 'store', 'state.in-memory', []));
    const token = await bed.identity(ns, 'late-0', 'late');
    const port = await freePort();
    const { s, base } = await startSidecar(ns, 'late-0', 'late', token, `127.0.0.1:${port}`, { RT_OPERATOR_INITIAL_WAIT: '300' });
    const outbound = await fetch(`${base}/v1.0/healthz/outbound`);
    expect(outbound.status).toBe(500);
    expect(((await outbound.json()) as { message: string }).message).toMatch(/operator at 127\.0\.0\.1:\d+: unreachable/);
    expect(s.out()).toMatch(/starting without them and retrying/);

    // the operator comes up on that address: the sidecar connects and loads its components
    const late = new Operator({ kubeconfig: bed.kube.kubeconfig, grpcPort: port, listenAddress: '127.0.0.1', tlsCertFile: join(bed.dir, 'tls.crt'), tlsKeyFile: join(bed.dir, 'tls.key'), log: pino({ level: 'silent' }) });
    try {
      await late.start();
      await vi.waitFor(async () => expect(await names(base)).toEqual(['store']), { timeout: 20_000 });
      await vi.waitFor(async () => expect((await fetch(`${base}/v1.0/healthz/outbound`)).status).toBe(204), { timeout: 10_000 });
    } finally {
      await late.close();
    }
    // gone again: the component stays and keeps working, outbound health says why
    await vi.waitFor(async () => expect((await fetch(`${base}/v1.0/healthz/outbound`)).status).toBe(500), { timeout: 10_000 });
    expect(await names(base)).toEqual(['store']);
    const save = await fetch(`${base}/v1.0/state/store`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: 2 }]) });
    expect(save.status).toBe(204);
  }, 60_000);

  it('watchdog: reports pods annotated rt.io/enabled without rt-sidecar, deletes those a controller owns', async () => {
    const ns = 'watchdog';
    await bed.namespace(ns);
    const rs = {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: { name: 'web', namespace: ns },
      spec: { replicas: 0, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
    };
    await bed.apply(rs);
    const uid = JSON.parse(await bed.kubectl(['get', 'replicaset', 'web', '-n', ns, '-o', 'json'])).metadata.uid as string;
    const pod = (name: string, containers: string[], extra: object = {}) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, labels: { app: 'web' }, annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': 'web' }, ...extra },
      spec: { containers: containers.map((c) => ({ name: c, image: 'x:1' })) },
    });
    await bed.apply(
      pod('owned', ['app'], { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid, controller: true }] }),
      pod('orphan', ['app']),
      pod('injected', ['app', 'rt-sidecar']),
    );
    const events = async (name: string) =>
      (JSON.parse(await bed.kubectl(['get', 'events', '-n', ns, '--field-selector', `involvedObject.name=${name}`, '-o', 'json'])).items as { reason: string; message: string; type: string }[]).filter(
        (e) => e.reason === 'SidecarNotInjected',
      );
    await vi.waitFor(async () => expect(await events('orphan')).toHaveLength(1), { timeout: 15_000 });
    expect((await events('orphan'))[0]).toMatchObject({ type: 'Warning', message: expect.stringMatching(/no rt-sidecar container.*no controller owns it/) });
    await vi.waitFor(async () => expect(await events('owned')).toHaveLength(1), { timeout: 15_000 });
    expect((await events('owned'))[0].message).toMatch(/ReplicaSet web recreates it/);
    // the owned pod is deleted (its controller would recreate it injected); the others stay
    await vi.waitFor(async () => expect((await bed.kube.kubectl(['get', 'pod', 'owned', '-n', ns])).stderr).toMatch(/NotFound/), { timeout: 15_000 });
    expect((await bed.kube.kubectl(['get', 'pod', 'orphan', '-n', ns])).code).toBe(0);
    expect(await events('injected')).toEqual([]);
  });
});
