/**
 * The test node's network: a network namespace made by the run, joined to the host by a veth
 * pair, with the pod range on a bridge inside it (CNI bridge + host-local) and the Service range
 * handled by kube-proxy inside it.
 *
 *   host ── <slot>h 198.18.0.(4k+1)/30 ══veth══ eth0 198.18.0.(4k+2)/30 ── node netns rtk<k>
 *                                                                         └─ cni0 198.18.(16+k).1/24 ── pods
 *   host routes: 198.18.(16+k).0/24 (pods) and 198.19.k.0/24 (Services) via 198.18.0.(4k+2)
 *
 * Every address is in 198.18.0.0/15, the range RFC 2544 sets aside for test networks, and lives
 * only on interfaces this run creates: the node namespace has no default route, no masquerade to
 * the outside and no interface but the veth and the bridge, so nothing a pod sends can leave the
 * machine. A slot k (0..31) gives concurrent clusters (parallel suites, `npm run cluster`)
 * ranges of their own; `ip netns add` of the slot's name is the atomic claim.
 *
 * The run folder's `network.json` names the slot, so the sweep of a dead run (sweep.ts) removes
 * its namespace and veth too.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const NETNS_PREFIX = 'rtk';
const SLOTS = 32;
export const NETWORK_FILE = 'network.json';

export interface NodeNetwork {
  slot: number;
  /** The namespace's name (`ip netns`), and its path for `nsenter --net=`. */
  netns: string;
  netnsPath: string;
  /** The host end of the veth pair. */
  hostInterface: string;
  /** The host's address on the veth: the API server listens here, pods reach it here. */
  hostAddress: string;
  /** The node's address (the kubelet, CoreDNS and the node's InternalIP). */
  nodeAddress: string;
  podCidr: string;
  /** The bridge's address: the pods' gateway. */
  podGateway: string;
  serviceCidr: string;
  /** The `kubernetes` Service's ClusterIP (the first of the range). */
  apiServiceAddress: string;
  /** `command args` run in the node's network namespace (only the network: mounts stay shared). */
  wrap(command: string, args: string[]): { command: string; args: string[] };
  remove(): Promise<void>;
}

export function networkUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'a network namespace needs root';
  for (const bin of ['/usr/sbin/ip', '/usr/bin/nsenter']) if (!existsSync(bin)) return `${bin} is missing`;
  for (const plugin of ['bridge', 'host-local', 'portmap', 'loopback']) if (!existsSync(`/usr/lib/cni/${plugin}`)) return `/usr/lib/cni/${plugin} is missing (Debian package containernetworking-plugins)`;
  if (!existsSync('/usr/sbin/iptables-restore')) return 'iptables-restore is missing (Debian package iptables), which kube-proxy needs';
  return undefined;
}

export function slotAddresses(k: number) {
  return {
    netns: `${NETNS_PREFIX}${k}`,
    hostInterface: `${NETNS_PREFIX}${k}h`,
    hostAddress: `198.18.0.${4 * k + 1}`,
    nodeAddress: `198.18.0.${4 * k + 2}`,
    podCidr: `198.18.${16 + k}.0/24`,
    podGateway: `198.18.${16 + k}.1`,
    serviceCidr: `198.19.${k}.0/24`,
    apiServiceAddress: `198.19.${k}.1`,
  };
}

const ip = (args: string[]) => run('/usr/sbin/ip', args);

/** Claims a free slot and builds its namespace, veth pair, addresses and host routes. */
export async function createNodeNetwork(runDir: string, log: (s: string) => void = () => {}): Promise<NodeNetwork> {
  // start at a slot of this process's own, so clusters that follow each other rarely reuse one
  const first = process.pid % SLOTS;
  for (let i = 0; i < SLOTS; i++) {
    const k = (first + i) % SLOTS;
    const a = slotAddresses(k);
    // claim in the run folder first, so a concurrent sweep never takes the namespace for an orphan
    writeFileSync(join(runDir, NETWORK_FILE), JSON.stringify({ slot: k, netns: a.netns, hostInterface: a.hostInterface }));
    try {
      await ip(['netns', 'add', a.netns]);
    } catch {
      continue; // taken by another cluster
    }
    const net = networkOf(k);
    try {
      const peer = `${a.netns}n`;
      await ip(['link', 'add', a.hostInterface, 'type', 'veth', 'peer', 'name', peer]);
      await ip(['link', 'set', peer, 'netns', a.netns]);
      await ip(['addr', 'add', `${a.hostAddress}/30`, 'dev', a.hostInterface]);
      await ip(['link', 'set', a.hostInterface, 'up']);
      const inNs = (args: string[]) => ip(['-n', a.netns, ...args]);
      await inNs(['link', 'set', peer, 'name', 'eth0']);
      await inNs(['addr', 'add', `${a.nodeAddress}/30`, 'dev', 'eth0']);
      await inNs(['link', 'set', 'eth0', 'up']);
      await inNs(['link', 'set', 'lo', 'up']);
      // the node routes between its veth and the pods' bridge; this sysctl is the namespace's own
      await run('/usr/bin/nsenter', [`--net=${net.netnsPath}`, '--', 'sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables']);
      // the host reaches pods and Services only through the veth; nothing is routed off the machine
      await ip(['route', 'add', a.podCidr, 'via', a.nodeAddress, 'dev', a.hostInterface]);
      await ip(['route', 'add', a.serviceCidr, 'via', a.nodeAddress, 'dev', a.hostInterface]);
      log(`node network ${a.netns}: host ${a.hostAddress}, node ${a.nodeAddress}, pods ${a.podCidr}, Services ${a.serviceCidr}`);
      return net;
    } catch (e) {
      await net.remove();
      throw new Error(`making the node network ${a.netns}: ${(e as { stderr?: string }).stderr || (e as Error).message}`);
    }
  }
  throw new Error(`all ${SLOTS} node network slots are taken (ip netns list shows ${NETNS_PREFIX}0..${SLOTS - 1})`);
}

export function networkOf(k: number): NodeNetwork {
  const a = slotAddresses(k);
  const netnsPath = `/run/netns/${a.netns}`;
  return {
    slot: k,
    ...a,
    netnsPath,
    wrap: (command, args) => ({ command: '/usr/bin/nsenter', args: [`--net=${netnsPath}`, '--', command, ...args] }),
    remove: () => removeNetwork(k),
  };
}

/**
 * Removes a slot's namespace and host veth (its routes go with it). Processes still inside the
 * namespace must have been stopped first: the kernel frees the namespace when its last one exits.
 */
export async function removeNetwork(k: number): Promise<void> {
  const a = slotAddresses(k);
  await ip(['link', 'del', a.hostInterface]).catch(() => undefined);
  await ip(['netns', 'del', a.netns]).catch(() => undefined);
}

/** The slot a run folder claimed, if any. */
export function claimedSlot(runDir: string): number | undefined {
  try {
    const { slot } = JSON.parse(readFileSync(join(runDir, NETWORK_FILE), 'utf8')) as { slot: number };
    return Number.isInteger(slot) ? slot : undefined;
  } catch {
    return undefined;
  }
}

/** The run's namespaces that exist now (`ip netns list`), by slot. */
export async function existingSlots(): Promise<number[]> {
  const { stdout } = await ip(['netns', 'list']).catch(() => ({ stdout: '' }));
  return stdout
    .split('\n')
    .map((l) => new RegExp(`^${NETNS_PREFIX}(\\d+)\\b`).exec(l)?.[1])
    .filter((s): s is string => s !== undefined)
    .map(Number);
}

/** How the host routes `address` (`ip route get`): the interface a packet to it leaves by. */
export async function routeOf(address: string): Promise<{ dev: string; via?: string; text: string }> {
  const { stdout } = await ip(['route', 'get', address]);
  return { dev: /\bdev (\S+)/.exec(stdout)?.[1] ?? '', via: /\bvia (\S+)/.exec(stdout)?.[1], text: stdout.trim() };
}

/** A pod namespace younger than this may be one whose interfaces CNI is still adding. */
const POD_NETNS_GRACE_MS = 60_000;

/**
 * Removes pod network namespaces (`/run/netns/cni-*`, made by a test node's containerd) that a
 * killed run left: namespaces with no interface but `lo` (their veth went with the node's
 * namespace), no process inside, older than a minute. A live pod's namespace always has its eth0.
 */
export async function removeDeadPodNetns(log: (s: string) => void = () => {}): Promise<void> {
  const dir = '/run/netns';
  if (!existsSync(dir)) return;
  const candidates = readdirSync(dir).filter((n) => n.startsWith('cni-'));
  if (candidates.length === 0) return;
  const inUse = new Set<string>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      inUse.add(readlinkSync(`/proc/${pid}/ns/net`));
    } catch {
      /* gone, or a kernel thread */
    }
  }
  for (const name of candidates) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (Date.now() - st.mtimeMs < POD_NETNS_GRACE_MS || inUse.has(`net:[${st.ino}]`)) continue;
      const { stdout } = await ip(['-n', name, '-o', 'link', 'show']);
      const links = stdout.split('\n').filter(Boolean);
      if (links.length !== 1 || !/^\d+: lo:/.test(links[0])) continue;
    } catch {
      continue;
    }
    log(`removing leftover pod network namespace ${name}`);
    await run('umount', [path]).catch(() => undefined);
    rmSync(path, { force: true });
  }
}
