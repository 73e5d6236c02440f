/**
 * A real node runs our pods: kubelet + containerd + runc, with `rt:dev` and the pause image built
 * by a real Docker engine and imported into the node's containerd. The pod has a native sidecar
 * (an init container with restartPolicy Always and a startup probe on rt's health endpoint) and
 * an app container; the kubelet starts the sidecar first, and the app's very first call to it
 * succeeds. A projected token with audience rt.io/operator is mounted and passes TokenReview.
 * Deleting the Deployment stops both containers (rt handles SIGTERM as PID 1 and exits 0).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { OPERATOR_AUDIENCE, type KubeCluster } from '../services/kube.ts';
import { clusterWithImagesUnavailable, startClusterWithImages, type ClusterWithImages } from '../services/kube-node.ts';
import { freePort } from '../services/net.ts';

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

describe.skipIf(!available)('a real node', () => {
  it('runs a Deployment whose native rt sidecar is healthy before the app starts, with a projected token for rt.io/operator; deleting it stops both containers', async () => {
    const k = kube!;
    const ns = 'node-smoke';
    await k.createNamespace(ns);
    const out = join(k.dir, 'out');
    mkdirSync(out, { recursive: true });
    chmodSync(out, 0o777);
    const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
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
            hostNetwork: true,
            terminationGracePeriodSeconds: 30,
            initContainers: [{
              name: 'rt-sidecar',
              image: rtImage,
              imagePullPolicy: 'Never',
              restartPolicy: 'Always',
              args: ['sidecar', '--app-id', 'smoke', '--http-port', String(http), '--grpc-port', String(grpc), '--metrics-port', String(metrics), '--data-dir', '/data'],
              startupProbe: { httpGet: { host: '127.0.0.1', path: '/v1.0/healthz', port: http }, periodSeconds: 1, failureThreshold: 60 },
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
});
