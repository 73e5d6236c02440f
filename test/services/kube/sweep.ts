/**
 * The last line of cleanup for test clusters. A run folder (rt-kube-run-<run id>-*) holds
 * `owner.json`, the pid and start time of the process that made it. What a folder's cluster
 * started is found by the folder: processes whose command line names it (containerd, shims,
 * the kubelet, kube-proxy, CoreDNS), mounts under it, the pods' cgroups named like it, and the
 * node network it claimed (network.json). Sweeping a folder kills and removes all of that.
 *
 * - `sweepKubeLeftovers()` (end of a vitest run, end of `npm run cluster`): this run's folders.
 * - `sweepDeadClusters()` (before a cluster starts): the folders of any run whose owner is gone
 *   (SIGKILL, a closed terminal), and node namespaces no live folder claims.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processIdentity } from '../../../sidecar/src/invoke/registry/local.ts';
import { ANY_RUN_PREFIX, OWNER_FILE, RUN_DIR_PREFIX } from './run-dir.ts';
import { claimedSlot, existingSlots, removeDeadPodNetns, removeNetwork, slotAddresses } from './network.ts';
import { ctrAt, removeCgroupRoot, removeNetnsFile, sandboxNetnsPaths } from './node.ts';

/** A folder without an owner file is a run's only while it is this young (it is written right after mkdtemp). */
const UNOWNED_GRACE_MS = 60_000;

function ownerAlive(dir: string): boolean {
  try {
    const { pid, startTicks } = JSON.parse(readFileSync(join(dir, OWNER_FILE), 'utf8')) as { pid: number; startTicks?: number };
    const now = processIdentity(pid);
    return now !== undefined && (startTicks === undefined || now.startTicks === startTicks);
  } catch {
    try {
      return Date.now() - statSync(dir).mtimeMs < UNOWNED_GRACE_MS;
    } catch {
      return false;
    }
  }
}

/** Kills, unmounts and removes everything of the given run folders; says what it removed. */
async function sweepFolders(dirs: string[], log: (s: string) => void): Promise<void> {
  if (dirs.length === 0) return;
  // a killed run's containerd still runs: ask it for its pods' network namespaces first
  const podNetns: string[] = [];
  for (const d of dirs) {
    const socket = join(d, 'node', 'containerd', 'containerd.sock');
    if (existsSync(socket)) podNetns.push(...(await sandboxNetnsPaths(ctrAt(socket))));
  }
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (Number(pid) === process.pid || !dirs.some((d) => cmdline.includes(d))) continue;
    log(`killing leftover ${cmdline.slice(0, 120)}`);
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  const mounts = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m) => m && dirs.some((d) => m === d || m.startsWith(`${d}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    log(`unmounting leftover ${m}`);
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
  for (const path of podNetns) {
    log(`removing leftover pod network namespace ${path}`);
    await removeNetnsFile(path);
  }
  for (const d of dirs) {
    const name = d.slice(d.lastIndexOf('/') + 1);
    // the pods' own processes (pause, the apps) live in the run's cgroups
    if (existsSync(join('/sys/fs/cgroup/pids', name)) || existsSync(join('/sys/fs/cgroup', name))) {
      log(`removing leftover cgroups ${name}`);
      removeCgroupRoot(name);
    }
    const slot = claimedSlot(d);
    if (slot !== undefined && (await existingSlots()).includes(slot)) {
      log(`removing leftover node network ${slotAddresses(slot).netns} (veth ${slotAddresses(slot).hostInterface}, its routes)`);
      await removeNetwork(slot);
    }
    log(`removing leftover ${d}`);
    rmSync(d, { recursive: true, force: true });
  }
}

const runFolders = (prefix: string) =>
  readdirSync(tmpdir())
    .filter((d) => d.startsWith(prefix))
    .map((d) => join(tmpdir(), d));

/** This run's clusters (a suite that died before its afterAll). */
export async function sweepKubeLeftovers(log: (s: string) => void = () => {}): Promise<void> {
  await sweepFolders(runFolders(RUN_DIR_PREFIX), log);
  await removeDeadPodNetns(log);
}

/**
 * The given run folders only (a suite's own clusters, when it fails halfway). Never the whole
 * run's: another worker's cluster of the same run may be running.
 */
export async function sweepRunFolders(dirs: string[], log: (s: string) => void = () => {}): Promise<void> {
  await sweepFolders(dirs.filter((d) => existsSync(d)), log);
}

/** Clusters of runs that were killed, and node namespaces that no live run claims. */
export async function sweepDeadClusters(log: (s: string) => void = () => {}): Promise<void> {
  const all = runFolders(ANY_RUN_PREFIX);
  await sweepFolders(all.filter((d) => !ownerAlive(d)), log);
  const claimed = new Set(runFolders(ANY_RUN_PREFIX).map(claimedSlot));
  for (const slot of await existingSlots()) {
    if (claimed.has(slot)) continue;
    log(`removing orphan node network ${slotAddresses(slot).netns}`);
    await removeNetwork(slot);
  }
  await removeDeadPodNetns(log);
}
