/**
 * A real Kubernetes cluster for the suites: `startKube()` starts a private control plane (etcd,
 * kube-apiserver, kube-controller-manager) on free loopback ports, with certificates and an
 * admin kubeconfig made for the run, and real kubectl and helm pointed at it. With
 * `{ node: true }` it adds a real node (containerd + kubelet + kube-scheduler). The binaries
 * are built or unpacked once into a cache (see kube/binaries.ts); `npm run cluster` uses the
 * same code. Nothing else in the repo answers Kubernetes API calls.
 */
import { existsSync } from 'node:fs';
import { binariesUnavailable, ensureKubeBinaries, ensureKubectlAndHelm, helmPath, kubectlPath } from './kube/binaries.ts';
import {
  apiRequest,
  apiWatch,
  helmRunner,
  kubectlRunner,
  OPERATOR_AUDIENCE,
  SERVICE_ACCOUNT_ISSUER,
  startControlPlane,
  stopControlPlane,
  type CommandResult,
  type ControlPlane,
} from './kube/control-plane.ts';
import { networkUnavailable, type NodeNetwork } from './kube/network.ts';
import { nodeUnavailable, startNode, type KubeNode } from './kube/node.ts';
import { pollUntil } from './kube/processes.ts';
import { sweepDeadClusters } from './kube/sweep.ts';

export { ensureKubeBinaries, ensureKubectlAndHelm, nodeUnavailable, OPERATOR_AUDIENCE, SERVICE_ACCOUNT_ISSUER };
export type { CommandResult, KubeNode };

/** How the node gets its images: the pause image's name and a function that imports images into containerd. */
export interface NodeImages {
  sandboxImage: string;
  importImages(containerdSocket: string): Promise<void>;
}

export const KUBECTL = kubectlPath();
export const HELM = helmPath();

export interface KubeCluster {
  /** Admin kubeconfig file (client certificate, group system:masters). */
  kubeconfig: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** The cluster CA: it signed the API server's certificate and every client certificate. */
  ca: { caFile: string; caPem: string };
  /** The run folder (logs of every process are `<name>.log` in it). */
  dir: string;
  /** The real kubectl with the admin kubeconfig (or `opts.kubeconfig`). */
  kubectl(args: string[], opts?: { input?: string; namespace?: string; kubeconfig?: string }): Promise<CommandResult>;
  /** The real helm with the admin kubeconfig and private helm folders. */
  helm(args: string[], opts?: { input?: string }): Promise<CommandResult>;
  /** One API call as the admin: `request('GET', '/api/v1/namespaces')`. */
  request(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown; text: string }>;
  /** A raw watch (`?watch=1` in `path`): one callback per event; `close()` drops the connection. */
  watch<E = { type: string; object: unknown }>(path: string, onEvent: (e: E) => void): { close(): void };
  /** Creates a namespace and waits for its `default` service account (pods need it). */
  createNamespace(name: string): Promise<void>;
  /** The control plane's internals, for suites that go deeper (certificates, binaries). */
  controlPlane: ControlPlane;
  /** The node, when started with `node`. */
  node?: KubeNode;
  /** The node's network (its addresses and ranges), unless started with `hostNetwork`. */
  network?: NodeNetwork;
  stop(): Promise<void>;
}

/** Why a cluster cannot run here, or undefined when it can. */
export function kubeUnavailable(): string | undefined {
  if (!existsSync(process.env.RT_TEST_ETCD_BIN || '/usr/bin/etcd')) return '/usr/bin/etcd is missing (Debian package etcd-server)';
  if (!existsSync('/usr/bin/openssl')) return 'openssl is missing';
  return binariesUnavailable();
}

/** Why a cluster with a node cannot run here, or undefined. */
export function kubeNodeUnavailable(): string | undefined {
  return kubeUnavailable() ?? nodeUnavailable() ?? networkUnavailable();
}

/** Why a node with a pod network cannot run here, or undefined (`hostNetwork` is the fallback). */
export { networkUnavailable };

/**
 * `node`: also start a node (containerd, kubelet, kube-scheduler) that runs pods from the
 * images `node.importImages` puts into its containerd; resolves when the node is Ready. The node
 * gets a pod network (its own network namespace, a CNI bridge, kube-proxy and CoreDNS: see
 * kube/network.ts) unless `hostNetwork` asks for the loopback mode, where pods must use
 * `hostNetwork: true`. Before starting, what a killed earlier run left is removed.
 */
export async function startKube(opts: { controllers?: boolean; node?: NodeImages; hostNetwork?: boolean; audit?: boolean; log?: (s: string) => void } = {}): Promise<KubeCluster> {
  await sweepDeadClusters(opts.log);
  const cp = await startControlPlane({ ...opts, podNetwork: !!opts.node && !opts.hostNetwork });
  let node: KubeNode | undefined;
  if (opts.node) {
    try {
      const started = await startNode(cp, opts.node);
      node = started.node;
    } catch (e) {
      await stopControlPlane(cp);
      throw e;
    }
  }
  const kubectl = kubectlRunner(cp);
  let stopped: Promise<void> | undefined;
  const cluster: KubeCluster = {
    kubeconfig: cp.kubeconfig,
    server: cp.server,
    ca: cp.ca,
    dir: cp.dir,
    kubectl,
    helm: helmRunner(cp),
    request: (method, path, body) => apiRequest(cp, method, path, body),
    watch: (path, onEvent) => apiWatch(cp, path, onEvent),
    async createNamespace(name) {
      const r = await kubectl(['create', 'namespace', name]);
      if (r.code !== 0 && !r.stderr.includes('AlreadyExists')) throw new Error(`kubectl create namespace ${name}: ${r.stderr}`);
      await pollUntil(`service account ${name}/default`, async () => (await apiRequest(cp, 'GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)).status === 200, 60_000);
    },
    controlPlane: cp,
    node,
    network: cp.network,
    stop: () => (stopped ??= (async () => {
      await node?.stop();
      await stopControlPlane(cp);
    })()),
  };
  return cluster;
}
