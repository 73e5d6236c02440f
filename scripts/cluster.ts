/**
 * `npm run cluster`: a real Kubernetes cluster on loopback for development — the same code the
 * suites use (test/services/kube.ts): etcd, kube-apiserver, kube-controller-manager and, unless
 * `--no-node`, a node (containerd + kubelet + kube-scheduler) with the pause image and `rt:dev`
 * built by a private Docker engine (rebuilt only when stale) and imported into it. Prints the
 * kubeconfig and stays up until Ctrl-C, then stops every pod, process and mount it made.
 */
// this cluster's folders are named for this process, so its sweep touches no other cluster
process.env.RT_TEST_RUN_ID = `cluster-${process.pid}`;
const { startKube } = await import('../test/services/kube.ts');
const { sweepKubeLeftovers } = await import('../test/services/kube/sweep.ts');
const { startClusterWithImages } = await import('../test/services/kube-node.ts');

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log(`usage: npm run cluster [-- --no-node]
  starts etcd, kube-apiserver, kube-controller-manager and a node (kubelet, containerd, kube-scheduler)
  on loopback, with rt:dev built and imported; Ctrl-C stops and removes everything.
  --no-node   the control plane only (no Docker engine, no images)`);
  process.exit(0);
}
const log = (s: string) => console.log(`[cluster] ${s}`);
const started = Date.now();
const withNode = !args.includes('--no-node');
let kube: Awaited<ReturnType<typeof startKube>> | undefined;
let stopCluster: (() => Promise<void>) | undefined;
let stopping = false;
const stop = async (why: string) => {
  if (stopping) return;
  stopping = true;
  log(`${why}: stopping`);
  await stopCluster?.();
  sweepKubeLeftovers(log);
  log('stopped; nothing left running');
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
try {
  if (withNode) {
    const cluster = await startClusterWithImages(log);
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
log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s: API server ${kube!.server}${withNode ? `, node ${kube!.node?.name} Ready (image rt:dev)` : ''}; logs in ${kube!.dir}`);
log(`kubectl and helm: ${kube!.controlPlane.kubectlBin}, ${kube!.controlPlane.helmBin}`);
console.log(`export KUBECONFIG=${kube!.kubeconfig}`);
// stay up until a signal
setInterval(() => {}, 1 << 30);
