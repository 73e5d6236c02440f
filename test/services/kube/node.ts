/**
 * A real node for the test cluster: containerd (Debian's package, with its own root, state and
 * socket in the run folder) with runc and the loopback CNI plugin only, a kubelet built from the
 * pinned release, and kube-scheduler. There is no pod network: pods use `hostNetwork: true`.
 * The kubelet refuses a loopback node IP, so the node has no address, and `kubectl logs`/`exec`
 * cannot reach it: read container logs with `podLog()` (the kubelet's pod log folder).
 *
 * Stop order matters (CLUSTER-NOTES): pods are deleted first, then the kubelet stops, then the
 * containers left in containerd are killed and removed, then containerd stops, and the mounts the
 * kubelet and containerd made under the run folder are unmounted.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../net.ts';
import { apiRequest, FEATURE_GATES, kubectlRunner, type ControlPlane } from './control-plane.ts';
import { startClusterDns, startKubeProxy } from './node-services.ts';
import type { NodeNetwork } from './network.ts';
import { writeKubeconfig } from './pki.ts';
import { pollUntil, startProcess, type ClusterProcess } from './processes.ts';

const run = promisify(execFile);
export const NODE_NAME = 'rt-node';
const CONTAINERD_BIN = '/usr/bin/containerd';
const CTR_BIN = '/usr/bin/ctr';

export interface KubeNode {
  name: string;
  /** containerd's socket (for `ctr -a`). */
  containerdSocket: string;
  /** `ctr -a <socket> -n k8s.io ...` */
  ctr(args: string[], input?: NodeJS.ReadableStream): Promise<{ code: number; stdout: string; stderr: string }>;
  /** The text a container wrote (its current or last run), or '' when there is none yet. */
  podLog(namespace: string, pod: string, container: string): string;
  stop(): Promise<void>;
}

/** Why a node cannot run here, or undefined. */
export function nodeUnavailable(): string | undefined {
  if (!existsSync(CONTAINERD_BIN)) return `${CONTAINERD_BIN} is missing (Debian package containerd)`;
  if (!existsSync('/usr/sbin/runc') && !existsSync('/usr/bin/runc')) return 'runc is missing (Debian package runc)';
  if (!existsSync('/usr/lib/cni/loopback')) return '/usr/lib/cni/loopback is missing (Debian package containernetworking-plugins)';
  if (process.getuid?.() !== 0) return 'a kubelet must run as root';
  return undefined;
}

function containerdConfig(dir: string, sandboxImage: string): string {
  return `version = 2
root = "${dir}/root"
state = "${dir}/state"
[grpc]
  address = "${dir}/containerd.sock"
[ttrpc]
  address = "${dir}/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  # this machine refuses a negative oom_score_adj: without this every sandbox fails
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${dir}/cni"
`;
}

const CGROUP_FS = '/sys/fs/cgroup';

/** The cgroup hierarchies mounted here (cgroup v1 controllers, name=systemd, and unified), as folders. */
function cgroupHierarchies(): string[] {
  if (!existsSync(CGROUP_FS)) return [];
  if (existsSync(join(CGROUP_FS, 'cgroup.controllers'))) return [CGROUP_FS]; // cgroup v2 only
  return readdirSync(CGROUP_FS, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => join(CGROUP_FS, d.name));
}

/**
 * Each node's pods live under a cgroup root of their own: a kubelet kills the processes of every
 * pod cgroup under its root that it does not know, so two test nodes on one machine sharing
 * /kubepods would SIGKILL each other's containers.
 */
export function makeCgroupRoot(name: string): string {
  for (const h of cgroupHierarchies()) {
    const dir = join(h, name);
    mkdirSync(dir, { recursive: true });
    // a cpuset cgroup takes no task until it has cpus and mems: those of its parent
    if (existsSync(join(dir, 'cpuset.cpus')) && readFileSync(join(dir, 'cpuset.cpus'), 'utf8').trim() === '') {
      writeFileSync(join(dir, 'cpuset.cpus'), readFileSync(join(h, 'cpuset.cpus'), 'utf8'));
      writeFileSync(join(dir, 'cpuset.mems'), readFileSync(join(h, 'cpuset.mems'), 'utf8'));
    }
  }
  return `/${name}`;
}

/** Kills what is left in a node's cgroup root and removes its cgroups, deepest first. */
export function removeCgroupRoot(name: string): void {
  for (const h of cgroupHierarchies()) {
    const root = join(h, name);
    if (!existsSync(root)) continue;
    const dirs: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
      dirs.push(d);
    };
    walk(root);
    for (const d of dirs) {
      try {
        for (const pid of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
    for (const d of dirs) {
      for (let i = 0; i < 20; i++) {
        try {
          rmdirSync(d);
          break;
        } catch {
          // a killed process leaves its cgroup a moment later
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
        }
      }
    }
  }
}

/** The pods' network: a bridge in the node's namespace, addresses from its range, host ports mapped. */
function podNetworkConfig(dir: string, net: NodeNetwork): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'rt-pods',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        // no masquerade: pods talk to the host and to each other by their own addresses, and
        // the node namespace has no route off the machine to masquerade to
        ipMasq: false,
        hairpinMode: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: net.podCidr, gateway: net.podGateway }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(dir, 'cni-ipam') },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  });
}

function kubeletConfig(dir: string, cp: ControlPlane, socket: string, ports: { port: number; healthz: number }, serving: { certFile: string; keyFile: string }, cgroupRoot: string): string {
  const net = cp.network;
  return JSON.stringify({
    cgroupRoot,
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: net?.nodeAddress ?? '127.0.0.1',
    port: ports.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: ports.healthz,
    tlsCertFile: serving.certFile,
    tlsPrivateKeyFile: serving.keyFile,
    authentication: { x509: { clientCAFile: cp.ca.caFile }, webhook: { enabled: false }, anonymous: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    cgroupDriver: 'cgroupfs',
    failSwapOn: false,
    featureGates: Object.fromEntries(FEATURE_GATES.split(',').map((g) => [g.split('=')[0], g.split('=')[1] === 'true'])),
    // these machines run cgroup v1
    failCgroupV1: false,
    containerRuntimeEndpoint: `unix://${socket}`,
    podLogsDir: join(dir, 'pod-logs'),
    clusterDomain: 'cluster.local',
    // pods ask the cluster's DNS (CoreDNS on the node's address), which answers cluster.local
    // and forwards nothing; no pod gets the machine's own resolvers
    ...(net ? { clusterDNS: [net.nodeAddress], resolvConf: '' } : { resolvConf: '/etc/resolv.conf' }),
    // a shared 2-core test machine: never evict or collect our locally built images
    evictionHard: { 'memory.available': '50Mi', 'nodefs.available': '1%', 'nodefs.inodesFree': '1%', 'imagefs.available': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    // no KUBE-FIREWALL / KUBE-KUBELET-CANARY chains: on the host (--host-network) the kubelet would
    // leave them in the machine's own tables, dropping non-loopback traffic to 127.0.0.0/8
    makeIPTablesUtilChains: false,
    syncFrequency: '10s',
    fileCheckFrequency: '10s',
    nodeStatusUpdateFrequency: '5s',
    shutdownGracePeriod: '0s',
  });
}

export async function startNode(cp: ControlPlane, opts: { sandboxImage: string; importImages: (containerdSocket: string) => Promise<void> }): Promise<{ node: KubeNode; processes: ClusterProcess[] }> {
  const dir = join(cp.dir, 'node');
  const cdir = join(dir, 'containerd');
  const net = cp.network;
  mkdirSync(join(cdir, 'cni'), { recursive: true });
  mkdirSync(join(dir, 'pod-logs'), { recursive: true });
  const socket = join(cdir, 'containerd.sock');
  writeFileSync(join(cdir, 'config.toml'), containerdConfig(cdir, opts.sandboxImage));
  if (net) writeFileSync(join(cdir, 'cni', '10-rt-pods.conflist'), podNetworkConfig(dir, net));
  else writeFileSync(join(cdir, 'cni', '10-loopback.conflist'), JSON.stringify({ cniVersion: '0.4.0', name: 'loopback-only', plugins: [{ type: 'loopback' }] }));
  // the node's processes run in its network namespace (only the network: mounts stay the host's)
  const startInNode = (name: string, command: string, args: string[]) => {
    const c = net ? net.wrap(command, args) : { command, args };
    return startProcess(dir, name, c.command, c.args);
  };
  const processes: ClusterProcess[] = [];
  // named like the run folder, so the sweep finds it too
  const cgroupName = basename(cp.dir);
  const ctr = ctrAt(socket);

  let kubelet: ClusterProcess | undefined;
  const kubectl = kubectlRunner(cp);
  const stop = async () => {
    // 1. pods first, while the kubelet can still stop them gracefully
    if (kubelet && !kubelet.exited) await kubectl(['delete', 'pods', '--all', '--all-namespaces', '--grace-period=5', '--wait=true', '--timeout=60s']).catch(() => undefined);
    // 2. the kubelet, then whatever containerd still runs, then containerd and the scheduler
    await kubelet?.stop();
    const tasks = (await ctr(['tasks', 'list', '-q']).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean);
    for (const id of tasks) await ctr(['tasks', 'kill', '-s', 'SIGKILL', id]).catch(() => undefined);
    for (const id of tasks) await ctr(['tasks', 'delete', '-f', id]).catch(() => undefined);
    const containers = (await ctr(['containers', 'list', '-q']).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean);
    const podNetns = await sandboxNetnsPaths(ctr);
    for (const id of containers) await ctr(['containers', 'delete', id]).catch(() => undefined);
    for (const path of podNetns) await removeNetnsFile(path);
    for (const p of processes.filter((p) => p !== kubelet).reverse()) await p.stop();
    // 3. the kubelet's bind mount of its root, volume tmpfs mounts, overlay snapshots, then the pods' cgroups
    await unmountUnder(cp.dir);
    removeCgroupRoot(cgroupName);
  };
  try {
    const containerd = startInNode('containerd', CONTAINERD_BIN, ['--config', join(cdir, 'config.toml'), '--log-level', 'warn']);
    processes.push(containerd);
    await pollUntil('containerd answers', async () => (await ctr(['version'])).code === 0, 30_000, () => containerd.tail());
    await opts.importImages(socket);

    const kubeletCert = cp.pki.issue('kubelet-client', { cn: `system:node:${NODE_NAME}`, orgs: ['system:nodes'], usage: 'client' });
    const kubeletServing = cp.pki.issue('kubelet-serving', { cn: NODE_NAME, usage: 'server', sans: [`IP:${net?.nodeAddress ?? '127.0.0.1'}`, `DNS:${NODE_NAME}`] });
    const kubeletKubeconfig = writeKubeconfig(join(dir, 'kubelet.kubeconfig'), cp.server, cp.ca.caFile, `system:node:${NODE_NAME}`, kubeletCert);
    // in the node's namespace its ports are its own; on the host they are shared with other clusters
    const ports = net ? { port: 10250, healthz: 10248 } : { port: await freePort(), healthz: await freePort() };
    writeFileSync(join(dir, 'kubelet-config.json'), kubeletConfig(dir, cp, socket, ports, kubeletServing, makeCgroupRoot(cgroupName)));
    kubelet = startInNode('kubelet', join(cp.binDir, 'kubelet'), [
      `--config=${join(dir, 'kubelet-config.json')}`,
      `--kubeconfig=${kubeletKubeconfig}`,
      `--hostname-override=${NODE_NAME}`,
      ...(net ? [`--node-ip=${net.nodeAddress}`] : []),
      `--root-dir=${join(dir, 'kubelet')}`,
      `--cert-dir=${join(dir, 'kubelet-pki')}`,
      '--v=1',
    ]);
    processes.push(kubelet);

    const sched = cp.pki.issue('scheduler', { cn: 'system:kube-scheduler', usage: 'client' });
    const schedKubeconfig = writeKubeconfig(join(dir, 'scheduler.kubeconfig'), cp.server, cp.ca.caFile, 'system:kube-scheduler', sched);
    processes.push(
      startProcess(dir, 'kube-scheduler', join(cp.binDir, 'kube-scheduler'), [
        `--kubeconfig=${schedKubeconfig}`,
        `--authentication-kubeconfig=${schedKubeconfig}`,
        `--authorization-kubeconfig=${schedKubeconfig}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${await freePort()}`,
        `--cert-dir=${join(dir, 'scheduler-certs')}`,
        '--leader-elect=false',
      ]),
    );

    await pollUntil(
      `node ${NODE_NAME} Ready`,
      async () => {
        if (kubelet?.exited) throw new Error('kubelet exited');
        const r = await apiRequest(cp, 'GET', `/api/v1/nodes/${NODE_NAME}`);
        const conds = (r.body as { status?: { conditions?: Array<{ type: string; status: string }> } }).status?.conditions ?? [];
        return conds.some((c) => c.type === 'Ready' && c.status === 'True');
      },
      120_000,
      () => `kubelet log ends:\n${kubelet?.tail()}`,
    );
    if (net) {
      // Services and DNS: what makes `<svc>.<ns>.svc.cluster.local` reach a pod
      processes.push(await startKubeProxy(cp, net, dir, NODE_NAME));
      processes.push(await startClusterDns(cp, net, dir));
    }
  } catch (e) {
    await stop();
    throw e;
  }

  const node: KubeNode = {
    name: NODE_NAME,
    containerdSocket: socket,
    ctr,
    podLog(namespace, pod, container) {
      const logs = join(dir, 'pod-logs');
      const podDir = readdirSync(logs).find((d) => d.startsWith(`${namespace}_${pod}_`));
      if (!podDir || !existsSync(join(logs, podDir, container))) return '';
      const runs = readdirSync(join(logs, podDir, container)).filter((f) => f.endsWith('.log')).sort((a, b) => Number.parseInt(a) - Number.parseInt(b));
      if (runs.length === 0) return '';
      // CRI log lines: "<time> <stream> <P|F> <text>"
      return readFileSync(join(logs, podDir, container, runs.at(-1)!), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ').slice(3).join(' '))
        .join('\n');
    },
    stop,
  };
  return { node, processes };
}

type Ctr = (args: string[], input?: NodeJS.ReadableStream) => Promise<{ code: number; stdout: string; stderr: string }>;

/** `ctr -a <socket> -n k8s.io ...`, for a node's containerd. */
export function ctrAt(socket: string): Ctr {
  return (args, input) =>
    new Promise((resolve, reject) => {
      const p = spawn(CTR_BIN, ['-a', socket, '-n', 'k8s.io', ...args], { stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      p.once('error', reject);
      p.once('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
      if (input && p.stdin) input.pipe(p.stdin);
    });
}

/**
 * The network namespaces (/run/netns/cni-*) containerd made for the node's pod sandboxes, from
 * their specs. A sandbox the kubelet did not stop (a killed run, pods a controller made again
 * while the node stopped) keeps its namespace file: read them while containerd still answers.
 */
export async function sandboxNetnsPaths(ctr: Ctr): Promise<string[]> {
  const paths = new Set<string>();
  const containers = (await ctr(['containers', 'list', '-q']).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean);
  for (const id of containers) {
    const info = await ctr(['containers', 'info', id]).catch(() => ({ stdout: '{}' }));
    try {
      const spec = (JSON.parse(info.stdout) as { Spec?: { linux?: { namespaces?: Array<{ type: string; path?: string }> } } }).Spec;
      for (const n of spec?.linux?.namespaces ?? []) if (n.type === 'network' && n.path?.includes('/netns/cni-')) paths.add(n.path);
    } catch {
      /* not JSON: nothing to learn */
    }
  }
  return [...paths];
}

/** Unmounts and removes a network namespace's file (`/run/netns/<name>`): the namespace goes once no process is in it. */
export async function removeNetnsFile(path: string): Promise<void> {
  await run('umount', [path]).catch(() => undefined);
  rmSync(path, { force: true });
}

/** Unmounts everything mounted under `root`, deepest first (kubelet bind mounts, tmpfs volumes, overlay snapshots, netns). */
export async function unmountUnder(root: string): Promise<void> {
  const mounts = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && (m === root || m.startsWith(`${root}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) await run('umount', ['-l', m]).catch(() => undefined);
}
