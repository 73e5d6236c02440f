/**
 * `npm run cluster`: a real Kubernetes cluster on loopback for development — the same code the
 * suites use (test/services/kube.ts). Prints the kubeconfig and stays up until Ctrl-C, then
 * stops every process and removes its folders.
 */
// this cluster's folders are named for this process, so its sweep touches no other cluster
process.env.RT_TEST_RUN_ID = `cluster-${process.pid}`;
const { startKube } = await import('../test/services/kube.ts');
const { sweepKubeLeftovers } = await import('../test/services/kube/sweep.ts');

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log('usage: npm run cluster [-- --no-controllers]\n  starts etcd, kube-apiserver and kube-controller-manager on loopback; Ctrl-C stops them');
  process.exit(0);
}
const started = Date.now();
const kube = await startKube({ controllers: !args.includes('--no-controllers'), log: (s) => console.log(`[cluster] ${s}`) });
console.log(`[cluster] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: API server ${kube.server}, logs in ${kube.dir}`);
console.log(`[cluster] kubeconfig: ${kube.kubeconfig}`);
console.log(`export KUBECONFIG=${kube.kubeconfig}`);
console.log(`[cluster] kubectl and helm: ${kube.controlPlane.kubectlBin}, ${kube.controlPlane.helmBin}`);

let stopping = false;
const stop = async (sig: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`\n[cluster] ${sig}: stopping`);
  await kube.stop();
  sweepKubeLeftovers((s) => console.log(`[cluster] ${s}`));
  console.log('[cluster] stopped; nothing left running');
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
// stay up
setInterval(() => {}, 1 << 30);
