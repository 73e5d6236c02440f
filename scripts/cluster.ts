/**
 * `npm run cluster`: a real Kubernetes cluster for development — the same code the suites use
 * (test/services/kube.ts): etcd, kube-apiserver, kube-controller-manager and, unless
 * `--no-node`, a node (containerd + kubelet + kube-scheduler, kube-proxy and CoreDNS) in a
 * network namespace of its own with a pod network, with the pause image and `rt:dev` built by a
 * private Docker engine (rebuilt only when stale) and imported into it. Prints the kubeconfig and
 * stays up until Ctrl-C, SIGTERM or SIGHUP, then stops every pod, process, mount and interface it
 * made. Before starting it removes what a killed earlier run left, and says what.
 */
// this cluster's folders are named for this process, so its sweep touches no other cluster
process.env.RT_TEST_RUN_ID = `cluster-${process.pid}`;
const { startKube } = await import('../test/services/kube.ts');
const { sweepKubeLeftovers } = await import('../test/services/kube/sweep.ts');
const { startClusterWithImages } = await import('../test/services/kube-node.ts');

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log(`usage: npm run cluster [-- --no-node | --host-network]
  starts etcd, kube-apiserver, kube-controller-manager and a node (kubelet, containerd, kube-scheduler,
  kube-proxy, CoreDNS) with a pod network in a network namespace, with rt:dev built and imported;
  Ctrl-C (or SIGTERM, SIGHUP) stops and removes everything.
  --no-node        the control plane only (no Docker engine, no images)
  --host-network   no pod network: the node and its pods share the host's network and talk over
                   127.0.0.1 (pods need hostNetwork: true; install the chart with e2e/values-hostnetwork.yaml)`);
  process.exit(0);
}
const log = (s: string) => console.log(`[cluster] ${s}`);
const started = Date.now();
const withNode = !args.includes('--no-node');
const hostNetwork = args.includes('--host-network');
let kube: Awaited<ReturnType<typeof startKube>> | undefined;
let stopCluster: (() => Promise<void>) | undefined;
let stopping = false;
const stop = async (why: string) => {
  if (stopping) return;
  stopping = true;
  log(`${why}: stopping`);
  await stopCluster?.();
  await sweepKubeLeftovers(log);
  log('stopped; nothing left running');
  process.exit(0);
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void stop(signal));
try {
  if (withNode) {
    const cluster = await startClusterWithImages(log, { hostNetwork });
    kube = cluster.kube;
    stopCluster = cluster.stop;
  } else {
    kube = await startKube({ log });
    stopCluster = kube.stop;
  }
} catch (e) {
  console.error(`[cluster] could not start: ${(e as Error).message}`);
  await stop('failed');
}
const net = kube!.network;
log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s: API server ${kube!.server}${withNode ? `, node ${kube!.node?.name} Ready (image rt:dev)` : ''}; logs in ${kube!.dir}`);
if (net) log(`pod network: node ${net.nodeAddress} (netns ${net.netns}), pods ${net.podCidr}, Services ${net.serviceCidr}, DNS ${net.nodeAddress} (cluster.local)`);
log(`kubectl and helm: ${kube!.controlPlane.kubectlBin}, ${kube!.controlPlane.helmBin}`);
console.log(`export KUBECONFIG=${kube!.kubeconfig}`);
// stay up until a signal
setInterval(() => {}, 1 << 30);
