/**
 * What a node with a pod network runs beside the kubelet, as processes in the node's network
 * namespace (as a node's own daemons, not pods):
 * - kube-proxy (iptables mode), built from the pinned k8s.io/kubernetes, routes ClusterIP and
 *   headless Services and the `kubernetes` Service in that namespace; the host's route to the
 *   Service range leads there, so the API server reaches webhooks through their Services;
 * - CoreDNS, serving cluster.local on the node's address (the kubelet's clusterDNS). It forwards
 *   nothing: a name outside the cluster gets no answer from the machine's resolvers.
 */
import { Resolver } from 'node:dns/promises';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiRequest, type ControlPlane } from './control-plane.ts';
import { coreDnsPath } from './binaries.ts';
import type { NodeNetwork } from './network.ts';
import { writeKubeconfig } from './pki.ts';
import { pollUntil, startProcess, type ClusterProcess } from './processes.ts';

const KUBE_PROXY_HEALTH_PORT = 10256;
const COREDNS_READY_PORT = 8181;

export async function startKubeProxy(cp: ControlPlane, net: NodeNetwork, dir: string, nodeName: string): Promise<ClusterProcess> {
  // system:kube-proxy is bound to the built-in system:node-proxier role
  const cert = cp.pki.issue('kube-proxy', { cn: 'system:kube-proxy', usage: 'client' });
  const kubeconfig = writeKubeconfig(join(dir, 'kube-proxy.kubeconfig'), cp.server, cp.ca.caFile, 'system:kube-proxy', cert);
  writeFileSync(
    join(dir, 'kube-proxy-config.json'),
    JSON.stringify({
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      clientConnection: { kubeconfig },
      hostnameOverride: nodeName,
      mode: 'iptables',
      clusterCIDR: net.podCidr,
      bindAddress: net.nodeAddress,
      healthzBindAddress: `${net.nodeAddress}:${KUBE_PROXY_HEALTH_PORT}`,
      metricsBindAddress: '127.0.0.1:10249',
      // leave the kernel's conntrack limits and timeouts alone: some are the whole machine's
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s', udpTimeout: '0s', udpStreamTimeout: '0s' },
      iptables: { syncPeriod: '5s', minSyncPeriod: '0s' },
    }),
  );
  const c = net.wrap(join(cp.binDir, 'kube-proxy'), [`--config=${join(dir, 'kube-proxy-config.json')}`, '--v=1']);
  const proxy = startProcess(dir, 'kube-proxy', c.command, c.args);
  await pollUntil(
    'kube-proxy healthy',
    async () => {
      if (proxy.exited) throw new Error('kube-proxy exited');
      const r = await fetch(`http://${net.nodeAddress}:${KUBE_PROXY_HEALTH_PORT}/healthz`, { signal: AbortSignal.timeout(2000) });
      return r.status === 200;
    },
    60_000,
    () => `kube-proxy log ends:\n${proxy.tail()}`,
  ).catch(async (e: unknown) => {
    await proxy.stop();
    throw e;
  });
  return proxy;
}

/** The rules CoreDNS's kubernetes plugin needs (as the CoreDNS project's own manifests grant them). */
const COREDNS_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'system:rt-coredns' },
  rules: [
    { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
    { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
  ],
};

export async function startClusterDns(cp: ControlPlane, net: NodeNetwork, dir: string): Promise<ClusterProcess> {
  const user = 'system:rt-coredns';
  for (const [path, body] of [
    ['/apis/rbac.authorization.k8s.io/v1/clusterroles', COREDNS_ROLE],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: user }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }] },
    ],
  ] as const) {
    const r = await apiRequest(cp, 'POST', path, body);
    if (r.status !== 201 && r.status !== 409) throw new Error(`POST ${path}: ${r.status} ${r.text}`);
  }
  const cert = cp.pki.issue('coredns', { cn: user, usage: 'client' });
  const kubeconfig = writeKubeconfig(join(dir, 'coredns.kubeconfig'), cp.server, cp.ca.caFile, user, cert);
  const corefile = join(dir, 'Corefile');
  writeFileSync(
    corefile,
    [
      `cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {`,
      `  bind ${net.nodeAddress}`,
      `  ready ${net.nodeAddress}:${COREDNS_READY_PORT}`,
      '  errors',
      '  kubernetes cluster.local in-addr.arpa ip6.arpa {',
      `    kubeconfig ${kubeconfig}`,
      '    pods insecure',
      '  }',
      '  cache 5',
      '}',
      // every other name: no plugin answers (REFUSED), and nothing is forwarded
      `.:53 {`,
      `  bind ${net.nodeAddress}`,
      '  errors',
      '}',
      '',
    ].join('\n'),
  );
  const c = net.wrap(coreDnsPath(), ['-conf', corefile]);
  const dns = startProcess(dir, 'coredns', c.command, c.args);
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([net.nodeAddress]);
  await pollUntil(
    'CoreDNS answers kubernetes.default.svc.cluster.local',
    async () => {
      if (dns.exited) throw new Error('coredns exited');
      const ready = await fetch(`http://${net.nodeAddress}:${COREDNS_READY_PORT}/ready`, { signal: AbortSignal.timeout(2000) });
      if (ready.status !== 200) return false;
      return (await resolver.resolve4('kubernetes.default.svc.cluster.local')).includes(net.apiServiceAddress);
    },
    60_000,
    () => `coredns log ends:\n${dns.tail()}`,
  ).catch(async (e: unknown) => {
    await dns.stop();
    throw e;
  });
  return dns;
}
