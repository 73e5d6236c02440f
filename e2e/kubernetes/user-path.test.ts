/**
 * The user's whole path on Kubernetes, in real pods on a real node with a pod network, driven by
 * the real kubectl and helm: helm install the chart with its default values (but the image and
 * the scheduler's storage); kubectl apply Components (Redis state and pub/sub, SFTP binding with
 * its password in a Secret, the pluggable state example as an injected container); Deployments
 * annotated for injection, with no port annotations, whose apps call their sidecar on localhost,
 * invoke each other by app id through their headless Services and publish to each other; a
 * Component change and delete reaching the running sidecar; a Job that completes; the
 * Deployment's deletion draining the sidecar; and, with the injector stopped, a pod that starts
 * without a sidecar and that the operator's watchdog reports. The watchdog's deletion stays off:
 * a pod the injector missed fails the test instead of being made again.
 *
 * RT_E2E_KUBECONFIG (+ RT_E2E_IMAGE, RT_E2E_COMPONENT_IMAGE) runs the same suite on a cluster of
 * the user's. On the local node the test process reaches pods at their own addresses (the host
 * routes the pod range into the node's network namespace), and pods reach the suite's Redis and
 * sshd through relays on the host's address on the node's veth.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { dockerMissing } from '../../test/services/docker.ts';
import { kubeNodeUnavailable } from '../../test/services/kube.ts';
import { relayTcp } from '../../test/services/net.ts';
import { redisTarget, type RedisTarget } from '../../test/services/redis.ts';
import { startSshd, sshdUnavailable, type SshdServer } from '../../test/services/sshd.ts';
import { CHART, chartValues, startUserCluster, type UserCluster } from './cluster.ts';
import * as grpc from '@grpc/grpc-js';
import { request as httpsRequest } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { schedulerService } from '../../scheduler/src/grpc/proto.ts';
import { issueFor } from '../../sidecar/src/identity/issue.ts';
import { certificateWorkload } from '../../shared/spiffe.ts';
import { createCsr, newWorkloadKey } from '../../sidecar/src/identity/x509.ts';

/** One HTTP/1.1 call to a sidecar's internal port over TLS, with the given client certificate (or none) and head. */
function internalCall(to: { host: string; port: number }, tls: { key?: string; cert?: string; ca: string }, headers: Record<string, string>) {
  return new Promise<{ status?: number; body?: string; error?: string }>((resolve) => {
    const req = httpsRequest({ ...to, path: '/whoami', method: 'GET', headers, agent: false, ...tls, checkServerIdentity: () => undefined, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', (e) => resolve({ error: e.message }));
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}

const onUserCluster = !!process.env.RT_E2E_KUBECONFIG;
const why = onUserCluster ? undefined : (kubeNodeUnavailable() ?? (dockerMissing() || undefined) ?? sshdUnavailable());
const available = requireService('Kubernetes node (kubelet, containerd, Docker engine) and sshd', why === undefined, why ?? '');

const NS = 'shop';
const SYSTEM = 'rt-system';
let cluster: UserCluster | undefined;
let redis: RedisTarget;
let redisClient: Redis | undefined;
let sshd: SshdServer | undefined;
let out = '';
/** Where pods reach the suite's Redis and sshd: relays on the host's veth address on the local node, the servers themselves elsewhere. */
let redisForPods = '';
let sshdForPods = '';
const relays: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  if (!available) return;
  redis = await redisTarget();
  redisClient = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  sshd = await startSshd();
  cluster = await startUserCluster((l) => console.log(`[e2e] ${l}`));
  redisForPods = redis.redisHost;
  sshdForPods = sshd.address;
  if (cluster.hostAddress) {
    const r = await relayTcp(cluster.hostAddress, { host: redis.host, port: redis.port });
    const h = await relayTcp(cluster.hostAddress, { host: sshd.host, port: sshd.port });
    relays.push(r, h);
    [redisForPods, sshdForPods] = [r.address, h.address];
  }
  out = mkdtempSync(join(tmpdir(), 'rt-e2e-k8s-out-'));
  chmodSync(out, 0o777);
}, 1_500_000);

afterAll(async () => {
  if (cluster) {
    await cluster.helm(['uninstall', 'rt', '--namespace', SYSTEM, '--wait', '--timeout', '2m']).catch(() => undefined);
    await cluster.stop();
  }
  for (const r of relays) await r.close();
  await sshd?.close();
  redisClient?.disconnect();
  if (out) rmSync(out, { recursive: true, force: true });
}, 300_000);

async function ok(r: Promise<{ code: number; stdout: string; stderr: string }>, what: string): Promise<string> {
  const done = await r;
  if (done.code !== 0) throw new Error(`${what} failed (${done.code}): ${done.stderr}\n${done.stdout}`);
  return done.stdout;
}
const apply = (obj: unknown) => ok(cluster!.kubectl(['apply', '-f', '-'], { input: JSON.stringify(obj) }), 'kubectl apply');

interface Pod {
  metadata: { name: string; uid: string; annotations?: Record<string, string> };
  spec: { initContainers?: Array<{ name: string }>; containers: Array<{ name: string }>; volumes?: Array<{ name: string; projected?: { sources: Array<{ podCertificate?: { signerName: string } }> } }> };
  status?: {
    phase?: string;
    podIP?: string;
    initContainerStatuses?: Array<{ name: string; ready: boolean; state: { running?: { startedAt: string }; terminated?: { exitCode: number } } }>;
    containerStatuses?: Array<{ name: string; ready: boolean; state: { running?: { startedAt: string }; terminated?: { exitCode: number } } }>;
  };
}
async function pods(ns: string, selector: string): Promise<Pod[]> {
  return (JSON.parse(await ok(cluster!.kubectl(['get', 'pods', '-n', ns, '-l', selector, '-o', 'json']), 'get pods')) as { items: Pod[] }).items;
}

function component(name: string, type: string, metadata: Array<Record<string, unknown>>, annotations?: Record<string, string>, scopes?: string[]) {
  return { apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name, namespace: NS, ...(annotations ? { annotations } : {}) }, spec: { type, version: 'v1', metadata }, ...(scopes ? { scopes } : {}) };
}
const redisMetadata = () => [{ name: 'redisHost', value: redisForPods }, { name: 'redisDB', value: String(redis.db) }, ...(redis.password ? [{ name: 'redisPassword', value: redis.password }] : [])];
const redisComponent = (extra: Array<Record<string, unknown>> = []) => component('orders', 'state.redis', [...redisMetadata(), ...extra]);
const sftpMetadata = (withAddress: boolean) => [
  { name: 'rootPath', value: sshd!.root },
  ...(withAddress ? [{ name: 'address', value: sshdForPods }] : []),
  { name: 'username', value: sshd!.username },
  { name: 'password', secretKeyRef: { name: 'sftp', key: 'password' } },
  { name: 'hostPublicKey', value: sshd!.hostKeys.ed25519 },
];
/** An SFTP binding the operator finds invalid (no address) until it is fixed. */
const brokenComponent = (fixed = false) => component('archive', 'bindings.sftp', sftpMetadata(fixed));

/**
 * The app: calls the sidecar on localhost for all three components, writes what it got, then
 * waits to be stopped. It also serves its sidecar on localhost:3000: \`/whoami\` answers its name
 * (for invocation by app id), and the app named stock subscribes to \`orders\` on \`bus\` and
 * writes what it receives.
 */
const APP = `
const fs = require('node:fs');
const me = process.env.OUT_NAME || 'app';
require('node:http').createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/rt/subscribe') return res.end(JSON.stringify(me === 'stock' ? [{ pubsubname: 'bus', topic: 'orders', route: '/orders' }] : []));
    if (req.url === '/orders') {
      fs.writeFileSync('/out/' + me + '-orders.json', JSON.stringify({ event: JSON.parse(body), pubsubname: req.headers.pubsubname }));
      return res.end('{}');
    }
    if (req.url === '/whoami') return res.end(JSON.stringify({ me, caller: req.headers['rt-caller-app-id'] ?? req.headers['dapr-caller-app-id'] }));
    res.statusCode = 404;
    res.end('{}');
  });
}).listen(3000, '127.0.0.1');
const base = 'http://127.0.0.1:' + process.env.RT_HTTP_PORT;
const call = async (path, body) => {
  const r = await fetch(base + path, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.text() };
};
(async () => {
  const got = {};
  got.redisSave = await call('/v1.0/state/orders', [{ key: 'order-1', value: { item: 'book', qty: 2 } }]);
  got.redisGet = await call('/v1.0/state/orders/order-1');
  got.sftpCreate = await call('/v1.0/bindings/files', { operation: 'create', data: Buffer.from('hello from the pod').toString('base64'), metadata: { fileName: 'from-pod.txt' } });
  got.memSave = await call('/v1.0/state/memstore', [{ key: 'k1', value: 'v1' }]);
  got.memGet = await call('/v1.0/state/memstore/k1');
  fs.writeFileSync('/out/' + (process.env.OUT_NAME || 'app') + '.json', JSON.stringify(got));
  if (process.env.EXIT_WHEN_DONE) process.exit(0);
})().catch((e) => { fs.writeFileSync('/out/' + (process.env.OUT_NAME || 'app') + '.json', JSON.stringify({ error: String(e) })); process.exit(1); });
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1 << 30);`;

/** An annotated pod as a user writes it: the app's id and port, nothing about the sidecar's ports. */
function podTemplate(appId: string, opts: { exit?: boolean; outName: string; annotations?: Record<string, string> }) {
  return {
    metadata: {
      labels: { app: appId },
      annotations: {
        'rt.io/enabled': 'true',
        'rt.io/app-id': appId,
        'rt.io/app-port': '3000',
        'rt.io/inject-pluggable-components': 'true',
        ...opts.annotations,
      },
    },
    spec: {
      terminationGracePeriodSeconds: 30,
      ...(opts.exit ? { restartPolicy: 'Never' } : {}),
      containers: [{
        name: 'app',
        image: cluster!.rtImage,
        imagePullPolicy: cluster!.local ? 'Never' : 'IfNotPresent',
        command: ['node', '-e', APP],
        env: [{ name: 'OUT_NAME', value: opts.outName }, ...(opts.exit ? [{ name: 'EXIT_WHEN_DONE', value: '1' }] : [])],
        volumeMounts: [{ name: 'out', mountPath: '/out' }],
      }],
      volumes: [{ name: 'out', hostPath: { path: out, type: 'Directory' } }],
    },
  };
}

/**
 * The example's container, injected into pods of apps in scope. Its image has no shell, and it
 * brings no probe: the sidecar waits for its socket (/tmp/rt-components-sockets/memstore.sock)
 * before it loads components.
 */
const componentContainer = () => ({
  name: 'memstore',
  image: cluster!.componentImage,
  imagePullPolicy: cluster!.local ? 'Never' : 'IfNotPresent',
  args: ['--name', 'memstore'],
});

let appPod: Pod;
/** A sidecar's HTTP API from the test process: the pod's own address (the host routes the pod range to the node). */
const sidecarOf = (p: Pod) => `http://${p.status!.podIP}:3500`;
async function readyPod(app: string): Promise<Pod> {
  return vi.waitFor(
    async () => {
      const p = (await pods(NS, `app=${app}`))[0];
      expect(p?.status?.containerStatuses?.[0]?.ready, JSON.stringify(p?.status ?? {})).toBe(true);
      return p;
    },
    { timeout: 180_000, interval: 1000 },
  );
}

describe.skipIf(!available)('the user path on Kubernetes', () => {
  it('1. helm install brings up the operator, injector and scheduler', { timeout: 300_000 }, async () => {
    const c = cluster!;
    // the chart's default: the operator serves TLS; the injector puts its CA beside each sidecar's token
    // the watchdog's deletion stays off (the default): every pod of this suite must come injected the first time
    const r = await c.helm(['install', 'rt', CHART, '--namespace', SYSTEM, '--create-namespace', ...(await chartValues(c)), '--wait', '--timeout', '4m']);
    if (r.code !== 0) throw new Error(`helm install: ${r.stderr}\n${(await c.kubectl(['get', 'pods,events', '-n', SYSTEM])).stdout}`);
    await ok(c.kubectl(['create', 'namespace', NS]), 'create namespace');
    await vi.waitFor(async () => expect((await c.kubectl(['get', 'serviceaccount', 'default', '-n', NS])).code).toBe(0), { timeout: 60_000, interval: 500 });
  });

  it('2. kubectl apply of the Components: Redis state, SFTP binding with a Secret, the pluggable example; the operator marks them Ready', { timeout: 300_000 }, async () => {
    const s = sshd!;
    await apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'sftp', namespace: NS }, stringData: { password: s.password } });
    await apply(redisComponent());
    await apply(component('files', 'bindings.sftp', sftpMetadata(true)));
    await apply(component('memstore', 'state.memstore', [], { 'rt.io/component-container': JSON.stringify(componentContainer()) }));
    await apply(component('bus', 'pubsub.redis', redisMetadata()));
    for (const name of ['orders', 'files', 'memstore', 'bus']) {
      await ok(cluster!.kubectl(['wait', '-n', NS, '--for=condition=Ready', '--timeout=60s', `component/${name}`]), `wait for Component ${name} Ready`);
    }
    // a typo: an SFTP binding without its address, unscoped, so in every sidecar's scope
    await apply(brokenComponent());
    await ok(cluster!.kubectl(['wait', '-n', NS, '--for=condition=Ready=False', '--timeout=60s', 'component/archive']), 'wait for Component archive Ready=False');
  });

  it('3-4. an annotated Deployment runs component, sidecar and app in that order; the app reads and writes all three through localhost, and Redis and sshd hold the values', { timeout: 300_000 }, async () => {
    const c = cluster!;
    await apply({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'checkout', namespace: NS }, spec: { replicas: 1, selector: { matchLabels: { app: 'checkout' } }, template: podTemplate('checkout', { outName: 'checkout' }) } });
    appPod = await readyPod('checkout');
    // the mutated pod: the component, then rt-sidecar, as native sidecars; then the app
    expect(appPod.spec.initContainers?.map((x) => x.name)).toEqual(['memstore', 'rt-sidecar']);
    expect(appPod.spec.containers.map((x) => x.name)).toEqual(['app']);
    const started = (name: string) => Date.parse([...(appPod.status?.initContainerStatuses ?? []), ...(appPod.status?.containerStatuses ?? [])].find((s) => s.name === name)!.state.running!.startedAt);
    expect(started('rt-sidecar')).toBeGreaterThanOrEqual(started('memstore'));
    expect(started('app')).toBeGreaterThanOrEqual(started('rt-sidecar'));

    const result = join(out, 'checkout.json');
    // written with writeFileSync, which is not atomic: read once it parses
    const got = await vi.waitFor(
      () => {
        expect(existsSync(result)).toBe(true);
        return JSON.parse(readFileSync(result, 'utf8')) as Record<string, { status: number; body: string }>;
      },
      { timeout: 60_000, interval: 500 },
    );
    expect(got, c.podLog(NS, appPod.metadata.name, 'rt-sidecar').slice(-3000)).toMatchObject({
      redisSave: { status: 204 },
      redisGet: { status: 200 },
      sftpCreate: { status: 200 },
      memSave: { status: 204 },
      memGet: { status: 200 },
    });
    expect(JSON.parse(got.redisGet.body)).toEqual({ item: 'book', qty: 2 });
    expect(JSON.parse(got.memGet.body)).toBe('v1');
    // the invalid Component did not stop the sidecar: it is reported, with the operator's reason
    const md = (await (await fetch(`${sidecarOf(appPod)}/v1.0/metadata`)).json()) as { components: Array<{ name: string }>; componentsNotLoaded: Array<{ name: string; type: string; reason: string }> };
    expect(md.components.map((x) => x.name)).not.toContain('archive');
    expect(md.componentsNotLoaded).toEqual([{ name: 'archive', type: 'bindings.sftp', reason: expect.stringMatching(/address/) }]);
    const call = await fetch(`${sidecarOf(appPod)}/v1.0/bindings/archive`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'list' }) });
    expect(call.status).toBe(400);
    expect(((await call.json()) as { message: string }).message).toMatch(/"archive" \(bindings\.sftp\) was not loaded: invalid.*address/);
    // read back from the servers themselves
    await redisClient!.connect();
    expect(JSON.parse((await redisClient!.hget('checkout||order-1', 'data'))!)).toEqual({ item: 'book', qty: 2 });
    expect(readFileSync(join(sshd!.root, 'from-pod.txt'), 'utf8')).toBe('hello from the pod');
  });

  it('4b. a second app: the two invoke each other by app id through their headless Services, publish to each other over Redis, and kubectl logs shows the sidecar\'s start', { timeout: 300_000 }, async () => {
    const c = cluster!;
    await apply({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'stock', namespace: NS }, spec: { replicas: 1, selector: { matchLabels: { app: 'stock' } }, template: podTemplate('stock', { outName: 'stock', annotations: { 'rt.io/pod-certificate': 'false' } }) } });
    const stock = await readyPod('stock');
    expect(stock.status?.podIP).not.toBe(appPod.status?.podIP);
    // each sidecar finds the other app by its id: <app-id>-rt.shop.svc.cluster.local, the operator's headless Service
    await vi.waitFor(
      async () => {
        for (const [from, to] of [[appPod, 'stock'], [stock, 'checkout']] as const) {
          const r = await fetch(`${sidecarOf(from)}/v1.0/invoke/${to}/method/whoami`, { signal: AbortSignal.timeout(5000) });
          const body = await r.text();
          expect(r.status, body).toBe(200);
          expect(JSON.parse(body)).toMatchObject({ me: to });
        }
      },
      { timeout: 60_000, interval: 1000 },
    );
    const endpoints = JSON.parse(await ok(c.kubectl(['get', 'endpointslices', '-n', NS, '-l', 'kubernetes.io/service-name=stock-rt', '-o', 'json']), 'get endpointslices')) as { items: Array<{ endpoints?: Array<{ addresses: string[] }> }> };
    expect(endpoints.items.flatMap((e) => e.endpoints ?? []).flatMap((e) => e.addresses)).toEqual([stock.status!.podIP]);

    // pub/sub between them: checkout publishes, stock's subscription receives it
    const published = await fetch(`${sidecarOf(appPod)}/v1.0/publish/bus/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ order: 7 }) });
    expect(published.status, await published.text()).toBe(204);
    const received = join(out, 'stock-orders.json');
    // the app's writeFileSync is not atomic: the file can be seen created and still empty
    const got = await vi.waitFor(
      () => {
        expect(existsSync(received)).toBe(true);
        return JSON.parse(readFileSync(received, 'utf8')) as { event: { data: unknown; source: string; topic: string; pubsubname: string } };
      },
      { timeout: 30_000, interval: 250 },
    );
    expect(got.event).toMatchObject({ data: { order: 7 }, topic: 'orders', pubsubname: 'bus', source: 'checkout' });

    // kubectl logs reaches the kubelet on the node's address
    const logs = await ok(c.kubectl(['logs', '-n', NS, stock.metadata.name, '-c', 'rt-sidecar']), 'kubectl logs');
    expect(logs).toMatch(/rt sidecar ready/);
  });

  it('4c. workload identity: the sidecars hold certificates of the identity CA; an internal port refuses plain TCP, a client without a certificate and a forged caller; the scheduler refuses a client without a certificate and another app\'s jobs', { timeout: 300_000 }, async () => {
    const c = cluster!;
    const stock = await readyPod('stock');
    const secret = JSON.parse(await ok(c.kubectl(['get', 'secret', 'rt-identity-ca', '-n', SYSTEM, '-o', 'json']), 'get identity CA')) as { data: Record<string, string> };
    const pem = (k: string) => Buffer.from(secret.data[k], 'base64').toString();
    const ca = { certPem: pem('tls.crt'), keyPem: pem('tls.key') };
    const bundle = pem('ca.crt');
    // a certificate for checkout as the issuer would sign it: the peer a compromised pod of checkout would be
    const asApp = async (appId: string) => {
      const key = newWorkloadKey();
      const csrPem = await createCsr(key, { trustDomain: 'cluster.local', namespace: NS, appId });
      const issued = await issueFor({ trustDomain: 'cluster.local', ca, trustBundlePem: bundle, ttlMs: 600_000 }, { namespace: NS, appId }, { id: appId, namespace: NS, trustDomain: 'cluster.local', csrPem });
      return { key: key.keyPem, cert: issued.certPem };
    };
    // both ways to a certificate: checkout's from the kubelet (PodCertificateRequest, signer rt.io/workload; the
    // project's cluster serves that beta API), stock's from the operator's issuer (rt.io/pod-certificate "false")
    const projected = (p: Pod) => (p.spec.volumes ?? []).flatMap((v) => v.projected?.sources ?? []).map((x) => x.podCertificate?.signerName).filter(Boolean);
    expect(projected(appPod)).toEqual(['rt.io/workload']);
    expect(projected(stock)).toEqual([]);
    const pcrs = JSON.parse(await ok(c.kubectl(['get', 'podcertificaterequests.v1beta1.certificates.k8s.io', '-n', NS, '-o', 'json']), 'get podcertificaterequests')) as { items: Array<{ spec: { podName: string }; status?: { conditions?: Array<{ type: string; message: string }> } }> };
    const ofCheckout = pcrs.items.filter((r) => r.spec.podName === appPod.metadata.name);
    expect(ofCheckout.length).toBeGreaterThan(0);
    expect(ofCheckout[0].status?.conditions).toEqual([expect.objectContaining({ type: 'Issued', message: `signed spiffe://cluster.local/ns/${NS}/checkout` })]);
    expect(pcrs.items.filter((r) => r.spec.podName === stock.metadata.name)).toEqual([]);
    const checkout = await asApp('checkout');
    const internal = { host: stock.status!.podIP!, port: 50002 };
    // the sidecar's own certificate, as its internal port presents it: stock, of this namespace
    const peer = await new Promise<ReturnType<typeof certificateWorkload>>((resolve, reject) => {
      const s = tlsConnect({ ...internal, ...checkout, ca: bundle, checkServerIdentity: () => undefined }, () => {
        resolve(certificateWorkload(s.getPeerCertificate()));
        s.end();
      });
      s.on('error', reject);
    });
    expect(peer).toEqual({ trustDomain: 'cluster.local', namespace: NS, appId: 'stock' });
    // plain HTTP to the internal port gets no answer; TLS without a client certificate fails the handshake
    const plain = await fetch(`http://${internal.host}:${internal.port}/whoami`, { signal: AbortSignal.timeout(5000) }).then((r) => `HTTP ${r.status}`, (e: Error) => e.name);
    expect(plain).not.toMatch(/^HTTP/);
    const anonymous = await internalCall(internal, { ca: bundle }, { 'rt-invoke-target': 'stock' });
    expect(anonymous.error, JSON.stringify(anonymous)).toBeDefined();
    // checkout's certificate with a caller head that says otherwise: refused; its own head: answered
    const forged = await internalCall(internal, { ...checkout, ca: bundle }, { 'rt-invoke-target': 'stock', 'rt-invoke-caller-app-id': 'admin', 'rt-invoke-caller-namespace': NS });
    expect(forged.status, JSON.stringify(forged)).toBe(403);
    expect(forged.body).toMatch(/spiffe:\/\/cluster\.local\/ns\/shop\/checkout/);
    const honest = await internalCall(internal, { ...checkout, ca: bundle }, { 'rt-invoke-target': 'stock', 'rt-invoke-caller-app-id': 'checkout', 'rt-invoke-caller-namespace': NS });
    expect(honest.status, JSON.stringify(honest)).toBe(200);
    expect(JSON.parse(honest.body!)).toMatchObject({ me: 'stock', caller: 'checkout' });

    // the scheduler: mutual TLS, each client limited to its certificate's app
    const sched = (await pods(SYSTEM, 'app.kubernetes.io/component=scheduler'))[0];
    const address = `${sched.status!.podIP}:50006`;
    const target = { 'grpc.ssl_target_name_override': `rt-scheduler-0.rt-scheduler.${SYSTEM}.svc.cluster.local` };
    const Scheduler = schedulerService();
    const list = (creds: grpc.ChannelCredentials, req: object) =>
      new Promise<grpc.ServiceError | null>((resolve) => {
        const client = new Scheduler(address, creds, target) as unknown as grpc.Client & { ListJobs(r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void): void };
        client.ListJobs(req, { deadline: Date.now() + 10_000 }, (e) => {
          client.close();
          resolve(e);
        });
      });
    expect((await list(grpc.credentials.createSsl(Buffer.from(bundle)), { namespace: NS, appId: 'checkout' }))?.code).toBe(grpc.status.UNAVAILABLE);
    expect((await list(grpc.credentials.createInsecure(), { namespace: NS, appId: 'checkout' }))?.code).toBe(grpc.status.UNAVAILABLE);
    const asCheckout = grpc.credentials.createSsl(Buffer.from(bundle), Buffer.from(checkout.key), Buffer.from(checkout.cert));
    expect(await list(asCheckout, { namespace: NS, appId: 'checkout' })).toBeNull();
    expect((await list(asCheckout, { namespace: NS, appId: 'stock' }))?.code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it('4d. actors: placement from the chart, two annotated Deployments hosting the same actor type; each actor is active on one of them, reached through either sidecar', { timeout: 300_000 }, async () => {
    const c = cluster!;
    // the app counts the calls each actor id gets in this process: one activation per id means
    // calls through either sidecar reach the same process and the count goes up by one each time
    const HALL = `
const seen = new Map();
require('node:http').createServer((req, res) => {
  const json = (v) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(v)); };
  if (req.url === '/dapr/config') return json({ entities: ['Counter'], actorIdleTimeout: '1h' });
  // /actors/Counter/<id>/method/hit (no backslashes: this text is a template literal)
  const p = req.url.split('/');
  const id = p.length === 6 && p[1] === 'actors' && p[2] === 'Counter' && p[4] === 'method' && p[5] === 'hit' ? p[3] : undefined;
  req.resume();
  req.on('end', () => {
    if (id && req.method === 'PUT') { seen.set(id, (seen.get(id) || 0) + 1); return json({ me: process.env.ME, calls: seen.get(id) }); }
    if (req.method === 'DELETE') return res.end();
    res.statusCode = 404; res.end();
  });
}).listen(3000);
process.on('SIGTERM', () => process.exit(0));`;
    const halls = ['hall-a', 'hall-b'];
    for (const h of halls) {
      const template = podTemplate(h, { outName: h, annotations: { 'rt.io/pod-certificate': 'false' } });
      template.spec.containers[0].command = ['node', '-e', HALL];
      template.spec.containers[0].env.push({ name: 'ME', value: h });
      await apply({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: h, namespace: NS }, spec: { replicas: 1, selector: { matchLabels: { app: h } }, template } });
    }
    try {
      await actorsAcross(halls);
    } finally {
      await ok(c.kubectl(['delete', 'deployment', ...halls, '-n', NS, '--cascade=foreground', '--wait=true', '--timeout=60s']), 'delete the actor Deployments');
      await vi.waitFor(async () => expect(await pods(NS, `app in (${halls.join(',')})`)).toEqual([]), { timeout: 60_000, interval: 500 });
    }
  });

  /** Calls through both sidecars reach one activation per actor id, spread over both hosts. */
  async function actorsAcross(halls: string[]): Promise<void> {
    const hosts = await Promise.all(halls.map((h) => readyPod(h)));
    const hit = async (via: Pod, id: string) => {
      const r = await fetch(`${sidecarOf(via)}/v1.0/actors/Counter/${id}/method/hit`, { method: 'PUT', signal: AbortSignal.timeout(10_000) });
      const body = await r.text();
      expect(r.status, body).toBe(200);
      return JSON.parse(body) as { me: string; calls: number };
    };
    // both sidecars have reported to placement and hold a table with both hosts
    await vi.waitFor(async () => {
      const owners = new Set<string>();
      for (let i = 0; i < 20; i++) owners.add((await hit(hosts[i % 2], `warm-${i}`)).me);
      expect([...owners].sort()).toEqual(halls);
    }, { timeout: 120_000, interval: 1000 });
    const owners: Record<string, number> = {};
    for (let i = 0; i < 40; i++) {
      const id = `c-${i}`;
      const first = await hit(hosts[0], id);
      const second = await hit(hosts[1], id);
      const third = await hit(hosts[0], id);
      // one activation: the same process answers each time, and its count goes 1, 2, 3
      expect([first, second, third], id).toEqual([{ me: first.me, calls: 1 }, { me: first.me, calls: 2 }, { me: first.me, calls: 3 }]);
      owners[first.me] = (owners[first.me] ?? 0) + 1;
    }
    // consistent hashing spreads 40 ids over both hosts
    expect(Object.keys(owners).sort(), JSON.stringify(owners)).toEqual(halls);
    const meta = (await (await fetch(`${sidecarOf(hosts[0])}/v1.0/metadata`)).json()) as { actors?: Array<{ type: string; count: number }>; actorRuntime?: { placement?: string } };
    expect(meta.actors?.find((a) => a.type === 'Counter')?.count).toBeGreaterThan(0);
  }

  it('5. a changed Component reaches the running sidecar within a second; a deleted one leaves it; a fixed one is hot-loaded', { timeout: 300_000 }, async () => {
    const sidecar = sidecarOf(appPod);
    await apply(brokenComponent(true));
    await vi.waitFor(
      async () => {
        const md = (await (await fetch(`${sidecar}/v1.0/metadata`)).json()) as { components: Array<{ name: string }>; componentsNotLoaded: unknown[] };
        expect(md.components.map((x) => x.name)).toContain('archive');
        expect(md.componentsNotLoaded).toEqual([]);
      },
      { timeout: 15_000, interval: 200 },
    );
    const listed = await fetch(`${sidecar}/v1.0/bindings/archive`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'list' }) });
    expect(listed.status, await listed.text()).toBe(200);
    await apply(redisComponent([{ name: 'keyPrefix', value: 'none' }]));
    // the injector gave the sidecar the chart's scheduler: the jobs API works in the pod
    const job = await fetch(`${sidecar}/v1.0-alpha1/jobs/e2e-later`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dueTime: '1h', data: { n: 1 } }) });
    expect(job.status, await job.text()).toBe(204);
    expect(((await (await fetch(`${sidecar}/v1.0-alpha1/jobs/e2e-later`)).json()) as { name: string }).name).toBe('e2e-later');
    expect((await fetch(`${sidecar}/v1.0-alpha1/jobs/e2e-later`, { method: 'DELETE' })).status).toBe(204);
    const applied = Date.now();
    let tries = 0;
    await vi.waitFor(
      async () => {
        const key = `hot-${tries++}`;
        const r = await fetch(`${sidecar}/v1.0/state/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key, value: 1 }]) });
        expect(r.status).toBe(204);
        expect(await redisClient!.exists(key)).toBe(1);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(Date.now() - applied).toBeLessThan(1000);

    await ok(cluster!.kubectl(['delete', 'component', 'files', '-n', NS]), 'delete component');
    await vi.waitFor(
      async () => {
        const md = (await (await fetch(`${sidecar}/v1.0/metadata`)).json()) as { components: Array<{ name: string }> };
        expect(md.components.map((x) => x.name)).not.toContain('files');
      },
      { timeout: 5_000, interval: 50 },
    );
    const r = await fetch(`${sidecar}/v1.0/bindings/files`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'list' }) });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
  });

  it('5b. a sidecar that cannot start says why: in its log, and in a SidecarFailed Event on the pod, well inside its startup probe\'s budget', { timeout: 300_000 }, async () => {
    const c = cluster!;
    // its state store's server does not answer (a closed port on the host): the sidecar stops with the reason
    await apply(component('deadstore', 'state.redis', [{ name: 'redisHost', value: `${c.hostAddress ?? '127.0.0.1'}:1` }], undefined, ['stuck']));
    const started = Date.now();
    await apply({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'stuck', namespace: NS }, spec: { replicas: 1, selector: { matchLabels: { app: 'stuck' } }, template: podTemplate('stuck', { outName: 'stuck' }) } });
    const event = await vi.waitFor(async () => {
      const p = (await pods(NS, 'app=stuck'))[0];
      expect(p).toBeDefined();
      const events = JSON.parse(await ok(c.kubectl(['get', 'events', '-n', NS, '--field-selector', `involvedObject.uid=${p.metadata.uid}`, '-o', 'json']), 'get events')) as { items: Array<{ reason: string; type: string; message: string }> };
      const e = events.items.find((x) => x.reason === 'SidecarFailed');
      expect(e, JSON.stringify(events.items.map((x) => x.reason))).toBeDefined();
      return { pod: p, event: e! };
    }, { timeout: 120_000, interval: 1000 });
    expect(event.event).toMatchObject({ type: 'Warning', message: expect.stringMatching(/rt-sidecar stopped \(exit code 1, restart \d+\): rt sidecar could not start: component "deadstore" \(state\.redis\/v1/) });
    // the injected startup probe allows 300 s; the reason is there long before
    expect(Date.now() - started).toBeLessThan(120_000);
    // the app never started: the pod waits for its sidecar
    expect(event.pod.status?.containerStatuses?.[0]?.state.running).toBeUndefined();
    // and its log says the same (this run's or the one before)
    const logs = await c.kubectl(['logs', '-n', NS, event.pod.metadata.name, '-c', 'rt-sidecar']);
    const previous = await c.kubectl(['logs', '-n', NS, event.pod.metadata.name, '-c', 'rt-sidecar', '--previous']);
    expect(logs.stdout + previous.stdout).toMatch(/deadstore.*failed to initialise/);
    await ok(c.kubectl(['delete', 'deployment', 'stuck', '-n', NS, '--wait=true', '--timeout=60s']), 'delete stuck');
    await ok(c.kubectl(['delete', 'component', 'deadstore', '-n', NS]), 'delete deadstore');
  });

  it('6. an annotated Job completes when its app exits, beside the running Deployments, on the same default sidecar ports in its own pod network', { timeout: 300_000 }, async () => {
    const c = cluster!;
    await apply({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'nightly', namespace: NS }, spec: { backoffLimit: 0, template: podTemplate('nightly', { exit: true, outName: 'nightly' }) } });
    await ok(c.kubectl(['wait', '-n', NS, '--for=condition=Complete', '--timeout=180s', 'job/nightly']), 'wait for the Job');
    const got = JSON.parse(readFileSync(join(out, 'nightly.json'), 'utf8')) as Record<string, { status: number }>;
    expect(got.redisSave.status).toBe(204);
    expect(got.memGet.status).toBe(200);
    // the deleted Component is not served to the Job either
    expect(got.sftpCreate.status).toBeGreaterThanOrEqual(400);
    await ok(c.kubectl(['delete', 'job', 'nightly', '-n', NS, '--cascade=foreground', '--wait=true', '--timeout=60s']), 'delete the Job');
  });

  it('7. deleting the Deployments drains the sidecars (they stop on SIGTERM, well inside the grace period) and leaves no container', { timeout: 300_000 }, async () => {
    const c = cluster!;
    const started = Date.now();
    await ok(c.kubectl(['delete', 'deployment', 'checkout', 'stock', '-n', NS, '--cascade=foreground', '--wait=true', '--timeout=60s']), 'delete the Deployments');
    await vi.waitFor(async () => expect(await pods(NS, 'app in (checkout,stock)')).toEqual([]), { timeout: 60_000, interval: 500 });
    // a sidecar that ignored SIGTERM would hold the pod for the whole 30 s grace period
    expect(Date.now() - started).toBeLessThan(20_000);
    // the kubelet's garbage collection removes a deleted pod's containers (it runs once a minute)
    await vi.waitFor(async () => {
      const left = await c.containers(NS);
      if (left !== undefined) expect(left).toEqual([]);
    }, { timeout: 90_000, interval: 1000 });
  });

  it('8. with the injector stopped and failurePolicy Ignore, an annotated pod starts without a sidecar and the watchdog records an Event; a restart after the injector is back injects', { timeout: 300_000 }, async () => {
    const c = cluster!;
    await ok(c.kubectl(['scale', 'deployment', 'rt-injector', '-n', SYSTEM, '--replicas=0']), 'scale the injector down');
    await vi.waitFor(async () => expect(await pods(SYSTEM, 'app.kubernetes.io/component=injector')).toEqual([]), { timeout: 60_000, interval: 500 });
    const plain = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'late', namespace: NS }, spec: { replicas: 1, selector: { matchLabels: { app: 'late' } }, template: { metadata: { labels: { app: 'late' }, annotations: { 'rt.io/enabled': 'true' } }, spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'app', image: c.rtImage, imagePullPolicy: c.local ? 'Never' : 'IfNotPresent', command: ['node', '-e', "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1 << 30)"] }] } } } };
    await apply(plain);
    const first = await vi.waitFor(async () => {
      const p = (await pods(NS, 'app=late'))[0];
      expect(p).toBeDefined();
      return p;
    }, { timeout: 30_000, interval: 200 });
    expect([...(first.spec.initContainers ?? []), ...first.spec.containers].map((x) => x.name)).toEqual(['app']);
    // the Event on that pod; with deleteUninjected off (the chart's default) the pod stays as it is
    await vi.waitFor(async () => {
      const events = JSON.parse(await ok(c.kubectl(['get', 'events', '-n', NS, '--field-selector', `involvedObject.uid=${first.metadata.uid}`, '-o', 'json']), 'get events')) as { items: Array<{ reason: string; type: string; source?: { component?: string } }> };
      expect(events.items).toContainEqual(expect.objectContaining({ reason: 'SidecarNotInjected', type: 'Warning' }));
    }, { timeout: 30_000, interval: 500 });
    expect((await pods(NS, 'app=late')).map((p) => p.metadata.uid)).toEqual([first.metadata.uid]);
    // with the injector back, a restart of the Deployment brings an injected pod
    await ok(c.kubectl(['scale', 'deployment', 'rt-injector', '-n', SYSTEM, '--replicas=1']), 'scale the injector up');
    await ok(c.kubectl(['rollout', 'status', 'deployment/rt-injector', '-n', SYSTEM, '--timeout=120s']), 'injector rollout');
    // back = the API server reaches it through its Service: a Ready pod can come before kube-proxy
    // routes to it, and a pod admitted in between starts without its sidecar (failurePolicy Ignore),
    // as the steps above show. A server-side dry run calls the webhook and stores nothing.
    const probe = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'probe', namespace: NS, annotations: { 'rt.io/enabled': 'true', 'rt.io/app-id': 'probe' } }, spec: { containers: [{ name: 'app', image: c.rtImage, imagePullPolicy: 'Never' }] } };
    await vi.waitFor(
      async () => {
        const spec = (JSON.parse(await ok(c.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: JSON.stringify(probe) }), 'dry-run pod')) as { spec: { initContainers?: Array<{ name: string }>; containers: Array<{ name: string }> } }).spec;
        expect([...(spec.initContainers ?? []), ...spec.containers].map((x) => x.name)).toContain('rt-sidecar');
      },
      { timeout: 60_000, interval: 1000 },
    );
    await ok(c.kubectl(['rollout', 'restart', 'deployment/late', '-n', NS]), 'restart late');
    await vi.waitFor(async () => {
      const names = (await pods(NS, 'app=late')).map((p) => [...(p.spec.initContainers ?? []), ...p.spec.containers].map((x) => x.name));
      expect(names).toContainEqual(['rt-sidecar', 'app']);
    }, { timeout: 60_000, interval: 1000 });
    await ok(c.kubectl(['delete', 'deployment', 'late', '-n', NS, '--wait=true', '--timeout=60s']), 'delete late');
  });
});
