/**
 * A real node runs our pods: kubelet + containerd + runc, with `rt:dev` and the pause image built
 * by a real Docker engine and imported into the node's containerd, in a network namespace of the
 * run with a pod network (CNI bridge), kube-proxy and CoreDNS. Pods get their own addresses;
 * ClusterIP and headless Services and cluster DNS reach them; kubectl logs, exec and port-forward
 * work; every pod and Service address routes only into the node's namespace, and stopping the
 * cluster leaves none of it behind. The smoke pod has a native sidecar
 * (an init container with restartPolicy Always and a startup probe on rt's health endpoint) and
 * an app container; the kubelet starts the sidecar first, and the app's very first call to it
 * succeeds. A projected token with audience rt.io/operator is mounted and passes TokenReview.
 * Deleting the Deployment stops both containers (rt handles SIGTERM as PID 1 and exits 0).
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { OPERATOR_AUDIENCE, type KubeCluster } from '../services/kube.ts';
import { clusterWithImagesUnavailable, startClusterWithImages, type ClusterWithImages } from '../services/kube-node.ts';
import { routeOf } from '../services/kube/network.ts';

const why = clusterWithImagesUnavailable();
const available = requireService('Kubernetes node (kubelet, containerd, Docker engine)', why === undefined, why ?? '');

let cluster: ClusterWithImages | undefined;
let kube: KubeCluster | undefined;
let rtImage = '';
const cleanups: Array<() => void> = [];
beforeAll(async () => {
  if (!available) return;
  cluster = await startClusterWithImages((l) => console.log(`[cluster] ${l}`));
  kube = cluster.kube;
  rtImage = cluster.images.rt;
}, 1_200_000);
afterAll(async () => {
  for (const c of cleanups) c();
  await cluster?.stop();
}, 180_000);

interface PodStatus {
  metadata: { name: string; uid: string };
  status?: {
    phase?: string;
    initContainerStatuses?: Array<{ name: string; ready: boolean; started?: boolean; restartCount: number; state: { running?: { startedAt: string }; terminated?: { exitCode: number } } }>;
    containerStatuses?: Array<{ name: string; ready: boolean; restartCount: number; state: { running?: { startedAt: string }; terminated?: { exitCode: number; finishedAt: string } } }>;
  };
}

const inCidr = (address: string, cidr: string) => {
  const [base, bits] = cidr.split('/');
  const n = (a: string) => a.split('.').reduce((x, o) => (x << 8) + Number(o), 0) >>> 0;
  const mask = bits === '0' ? 0 : (~0 << (32 - Number(bits))) >>> 0;
  return ((n(address) & mask) >>> 0) === ((n(base) & mask) >>> 0);
};

/** A tiny web server for the network tests: answers its pod's name on 8080. */
const WEB = `require('node:http').createServer((q, s) => s.end(require('node:os').hostname())).listen(8080, () => console.log('web listening on 8080')); process.on('SIGTERM', () => process.exit(0));`;

/** What a pod sees of the cluster's DNS and Services, run in the pod by `kubectl exec`. */
const PROBE = (ns: string) => `
const dns = require('node:dns').promises;
(async () => {
  const out = {};
  out.resolvConf = require('node:fs').readFileSync('/etc/resolv.conf', 'utf8');
  out.service = (await dns.lookup('web.${ns}.svc.cluster.local')).address;
  out.short = (await dns.lookup('web')).address;
  out.headless = (await dns.resolve4('web-headless.${ns}.svc.cluster.local')).sort();
  out.viaService = await (await fetch('http://web:8080/')).text();
  out.api = (await dns.lookup('kubernetes.default.svc.cluster.local')).address;
  // the API server through the kubernetes Service, its certificate checked against the pod's CA bundle
  out.apiStatus = await new Promise((resolve) => {
    const ca = require('node:fs').readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt');
    require('node:https').get({ host: 'kubernetes.default.svc', path: '/version', ca, timeout: 5000 }, (r) => { r.resume(); resolve(r.statusCode); }).on('error', (e) => resolve(String(e.code ?? e)));
  });
  out.outside = await dns.lookup('example.com').then((r) => r.address, (e) => e.code);
  console.log(JSON.stringify(out));
})().catch((e) => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });`;

describe.skipIf(!available)('a real node', () => {
  it('has an address of its own on a veth; the pod and Service ranges route only into its namespace, which routes nowhere else', async () => {
    const k = kube!;
    const net = k.network!;
    expect(net, 'the cluster runs with a pod network').toBeDefined();
    const node = (await k.request('GET', `/api/v1/nodes/${k.node!.name}`)).body as { status: { addresses: Array<{ type: string; address: string }> } };
    expect(node.status.addresses.filter((a) => a.type === 'InternalIP').map((a) => a.address)).toEqual([net.nodeAddress]);
    for (const address of [net.nodeAddress, net.podGateway, net.apiServiceAddress, net.podCidr.replace(/0\/24$/, '77'), net.serviceCidr.replace(/0\/24$/, '200')]) {
      const route = await routeOf(address);
      expect(route.dev, route.text).toBe(net.hostInterface);
    }
    // inside the node's namespace there is no default route: nothing a pod sends leaves the machine
    const inside = await new Promise<{ code: number; out: string }>((resolve) => {
      const p = spawn('ip', ['-n', net.netns, 'route', 'get', '192.0.2.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr.on('data', (d: Buffer) => (out += d.toString()));
      p.once('close', (code) => resolve({ code: code ?? -1, out }));
    });
    expect(inside.code).not.toBe(0);
    expect(inside.out).toMatch(/unreachable/i);
  });

  it('gives pods their own addresses; a ClusterIP Service, a headless Service and cluster DNS reach them; kubectl logs, exec and port-forward work', async () => {
    const k = kube!;
    const net = k.network!;
    const ns = 'net';
    await k.createNamespace(ns);
    const web = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: ns },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            terminationGracePeriodSeconds: 2,
            containers: [{ name: 'web', image: rtImage, imagePullPolicy: 'Never', command: ['node', '-e', WEB], ports: [{ containerPort: 8080 }], readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 1 } }],
          },
        },
      },
    };
    const services = [
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: ns }, spec: { selector: { app: 'web' }, ports: [{ port: 8080 }] } },
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web-headless', namespace: ns }, spec: { clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 8080 }] } },
    ];
    for (const o of [web, ...services]) expect((await k.kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) })).code).toBe(0);
    await k.kubectl(['rollout', 'status', 'deployment/web', '-n', ns, '--timeout=120s']);
    const podList = JSON.parse((await k.kubectl(['get', 'pods', '-n', ns, '-l', 'app=web', '-o', 'json'])).stdout) as { items: Array<{ metadata: { name: string }; status: { podIP: string } }> };
    const webPods = podList.items;
    expect(webPods).toHaveLength(2);
    for (const p of webPods) expect(inCidr(p.status.podIP, net.podCidr), p.status.podIP).toBe(true);
    const names = webPods.map((p) => p.metadata.name).sort();
    const clusterIP = (JSON.parse((await k.kubectl(['get', 'service', 'web', '-n', ns, '-o', 'json'])).stdout) as { spec: { clusterIP: string } }).spec.clusterIP;
    expect(inCidr(clusterIP, net.serviceCidr)).toBe(true);

    // from the host: the ClusterIP (kube-proxy in the node's namespace) and each pod's own address
    await vi.waitFor(async () => expect(names).toContain(await (await fetch(`http://${clusterIP}:8080/`, { signal: AbortSignal.timeout(3000) })).text()), { timeout: 30_000, interval: 500 });
    for (const p of webPods) expect(await (await fetch(`http://${p.status.podIP}:8080/`)).text()).toBe(p.metadata.name);

    // from a pod: DNS names of both Services, the Service by its short name, the API server through `kubernetes`
    const exec = await k.kubectl(['exec', '-n', ns, webPods[0].metadata.name, '-c', 'web', '--', 'node', '-e', PROBE(ns)]);
    expect(exec.code, exec.stderr).toBe(0);
    const seen = JSON.parse(exec.stdout) as Record<string, unknown>;
    expect(seen.resolvConf).toMatch(new RegExp(`nameserver ${net.nodeAddress.replace(/\./g, '\\.')}`));
    expect(seen.resolvConf).toMatch(/search net\.svc\.cluster\.local svc\.cluster\.local cluster\.local/);
    expect(seen).toMatchObject({ service: clusterIP, short: clusterIP, headless: webPods.map((p) => p.status.podIP).sort(), api: net.apiServiceAddress });
    expect(names).toContain(seen.viaService);
    expect(seen.apiStatus).toBe(200);
    // names outside the cluster are not forwarded anywhere
    expect(seen.outside).toMatch(/^E/);

    // kubectl logs reaches the kubelet on the node's address
    const logs = await k.kubectl(['logs', '-n', ns, webPods[1].metadata.name]);
    expect(logs.stdout).toContain('web listening on 8080');

    // kubectl port-forward: a local port on the host to the pod's 8080
    const pf = spawn(k.controlPlane.kubectlBin, ['port-forward', '-n', ns, `pod/${webPods[1].metadata.name}`, ':8080'], { env: { ...process.env, KUBECONFIG: k.kubeconfig }, stdio: ['ignore', 'pipe', 'pipe'] });
    cleanups.push(() => pf.kill('SIGKILL'));
    const port = await new Promise<number>((resolve, reject) => {
      let text = '';
      const t = setTimeout(() => reject(new Error(`port-forward said: ${text}`)), 30_000);
      const read = (d: Buffer) => {
        text += d.toString();
        const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(text);
        if (m) {
          clearTimeout(t);
          resolve(Number(m[1]));
        }
      };
      pf.stdout.on('data', read);
      pf.stderr.on('data', read);
    });
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe(webPods[1].metadata.name);
    pf.kill('SIGTERM');
    expect((await k.kubectl(['delete', 'namespace', ns, '--wait=true', '--timeout=90s'])).code).toBe(0);
  }, 300_000);

  it('runs a Deployment whose native rt sidecar is healthy before the app starts, with a projected token for rt.io/operator; deleting it stops both containers', async () => {
    const k = kube!;
    const ns = 'node-smoke';
    await k.createNamespace(ns);
    const out = join(k.dir, 'out');
    mkdirSync(out, { recursive: true });
    chmodSync(out, 0o777);
    // the pod has its own network: rt's default ports are its own
    const [http, grpc, metrics] = [3500, 50001, 9090];
    // the app's first line: one call to the sidecar, no retry; then it waits to be stopped
    const app = `
      const fs = require('node:fs');
      fs.copyFileSync('/var/run/secrets/rt.io/token', '/out/token');
      fetch('http://127.0.0.1:${http}/v1.0/metadata').then(async (r) => {
        const body = await r.json();
        fs.writeFileSync('/out/first-call.json', JSON.stringify({ status: r.status, id: body.id }));
        console.log('first call', r.status);
      }, (e) => { fs.writeFileSync('/out/first-call.json', JSON.stringify({ error: String(e) })); console.log('first call failed', e); });
      process.on('SIGTERM', () => process.exit(0));
      setInterval(() => {}, 1 << 30);`;
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'smoke', namespace: ns },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'smoke' } },
        template: {
          metadata: { labels: { app: 'smoke' } },
          spec: {
            terminationGracePeriodSeconds: 30,
            initContainers: [{
              name: 'rt-sidecar',
              image: rtImage,
              imagePullPolicy: 'Never',
              restartPolicy: 'Always',
              args: ['sidecar', '--app-id', 'smoke', '--listen-address', '0.0.0.0', '--http-port', String(http), '--grpc-port', String(grpc), '--metrics-port', String(metrics), '--data-dir', '/data'],
              // probed on the pod's own address, as on any cluster
              startupProbe: { httpGet: { path: '/v1.0/healthz', port: http }, periodSeconds: 1, failureThreshold: 60 },
              securityContext: { readOnlyRootFilesystem: true, runAsNonRoot: true, allowPrivilegeEscalation: false },
              volumeMounts: [{ name: 'data', mountPath: '/data' }, { name: 'rt-token', mountPath: '/var/run/secrets/rt.io', readOnly: true }],
            }],
            containers: [{
              name: 'app',
              image: rtImage,
              imagePullPolicy: 'Never',
              command: ['node', '-e', app],
              volumeMounts: [{ name: 'out', mountPath: '/out' }, { name: 'rt-token', mountPath: '/var/run/secrets/rt.io', readOnly: true }],
            }],
            volumes: [
              { name: 'data', emptyDir: {} },
              { name: 'out', hostPath: { path: out, type: 'Directory' } },
              { name: 'rt-token', projected: { sources: [{ serviceAccountToken: { audience: OPERATOR_AUDIENCE, expirationSeconds: 3600, path: 'token' } }] } },
            ],
          },
        },
      },
    };
    const applied = await k.kubectl(['apply', '-f', '-'], { input: JSON.stringify(deployment) });
    expect(applied.stderr).toBe('');

    const pod = await vi.waitFor(
      async () => {
        const r = await k.kubectl(['get', 'pods', '-n', ns, '-l', 'app=smoke', '-o', 'json']);
        const items = (JSON.parse(r.stdout) as { items: PodStatus[] }).items;
        const p = items[0];
        expect(p?.status?.containerStatuses?.[0]?.ready, `pod status: ${JSON.stringify(p?.status ?? {})}`).toBe(true);
        expect(p.status?.initContainerStatuses?.[0]?.ready).toBe(true);
        return p;
      },
      { timeout: 120_000, interval: 1000 },
    );
    const sidecar = pod.status!.initContainerStatuses![0];
    const appStatus = pod.status!.containerStatuses![0];
    expect(sidecar.restartCount).toBe(0);
    expect(appStatus.restartCount).toBe(0);
    // the kubelet started the app only after the sidecar's startup probe passed
    expect(Date.parse(appStatus.state.running!.startedAt)).toBeGreaterThanOrEqual(Date.parse(sidecar.state.running!.startedAt));

    await vi.waitFor(() => expect(existsSync(join(out, 'first-call.json'))).toBe(true), { timeout: 30_000 });
    expect(JSON.parse(readFileSync(join(out, 'first-call.json'), 'utf8'))).toEqual({ status: 200, id: 'smoke' });

    // the projected token is for rt.io/operator and bound to this pod
    const token = readFileSync(join(out, 'token'), 'utf8').trim();
    const review = await k.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [OPERATOR_AUDIENCE] } });
    const status = (review.body as { status: { authenticated?: boolean; user?: { username: string; extra?: Record<string, string[]> } } }).status;
    expect(status.authenticated).toBe(true);
    expect(status.user?.username).toBe(`system:serviceaccount:${ns}:default`);
    expect(status.user?.extra?.['authentication.kubernetes.io/pod-name']).toEqual([pod.metadata.name]);

    // deleting the Deployment stops both containers well inside the 30 s grace period: rt ends on SIGTERM with exit code 0
    const sidecarLog = () => k.node!.podLog(ns, pod.metadata.name, 'rt-sidecar');
    expect(sidecarLog()).not.toBe('');
    // watch the pod while it goes: the kubelet reports its containers' exit codes before the pod is removed
    const exits = new Map<string, number>();
    const w = k.watch<{ type: string; object: PodStatus }>(`/api/v1/namespaces/${ns}/pods?watch=1&fieldSelector=metadata.name%3D${pod.metadata.name}`, (e) => {
      for (const c of [...(e.object.status?.initContainerStatuses ?? []), ...(e.object.status?.containerStatuses ?? [])]) {
        if (c.state.terminated) exits.set(c.name, c.state.terminated.exitCode);
      }
    });
    cleanups.push(() => w.close());
    const started = Date.now();
    const deleted = await k.kubectl(['delete', 'deployment', 'smoke', '-n', ns, '--cascade=foreground', '--wait=true', '--timeout=60s']);
    expect(deleted.code).toBe(0);
    await vi.waitFor(async () => {
      const r = await k.kubectl(['get', 'pods', '-n', ns, '-o', 'name']);
      expect(r.stdout.trim()).toBe('');
    }, { timeout: 60_000, interval: 500 });
    expect(Date.now() - started).toBeLessThan(25_000);
    w.close();
    expect(Object.fromEntries(exits)).toEqual({ 'rt-sidecar': 0, app: 0 });
    // nothing runs any more at once; the kubelet's garbage collection (every minute) then removes the stopped containers and sandbox
    const tasks = await k.node!.ctr(['tasks', 'list']);
    expect(tasks.stdout.split('\n').slice(1).filter((l) => l.includes('RUNNING'))).toEqual([]);
    await vi.waitFor(async () => {
      const containers = await k.node!.ctr(['containers', 'list', '-q']);
      expect(containers.stdout.trim()).toBe('');
    }, { timeout: 120_000, interval: 1000 });
  }, 400_000);

  it('stops without leaving its network namespace, veth, routes, processes or folder', async () => {
    const k = kube!;
    const net = k.network!;
    // what is this cluster's: a parallel suite's cluster may take the same slot (names) as soon as it is free
    const nsInode = statSync(net.netnsPath).ino;
    const ifindex = () => (existsSync(`/sys/class/net/${net.hostInterface}`) ? Number(readFileSync(`/sys/class/net/${net.hostInterface}/ifindex`, 'utf8')) : undefined);
    const ours = ifindex();
    await cluster!.stop();
    expect(existsSync(net.netnsPath) ? statSync(net.netnsPath).ino : undefined).not.toBe(nsInode);
    expect(ifindex()).not.toBe(ours);
    for (const address of [net.nodeAddress, net.apiServiceAddress, net.podGateway]) {
      // the host's route for these is no longer through this cluster's veth
      const route = await routeOf(address);
      if (route.dev === net.hostInterface) expect(ifindex()).not.toBe(ours);
    }
    // kube-proxy's rules lived in the node's namespace: the host's tables never had any
    const hostRules = await new Promise<string>((resolve) => {
      const p = spawn('iptables-save', [], { stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.once('close', () => resolve(out));
    });
    expect(hostRules).not.toMatch(/KUBE-|198\.1[89]\./);
    expect(existsSync(k.dir)).toBe(false);
    const left = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(k.dir);
        } catch {
          return false;
        }
      });
    expect(left).toEqual([]);
  }, 180_000);
});
