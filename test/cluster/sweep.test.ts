/**
 * A cluster whose owner was killed (SIGKILL, a closed terminal) leaves its processes running, its
 * node network namespace and veth in place and its folder behind. The next cluster's start
 * (`sweepDeadClusters`, which `startKube` and `npm run cluster` call first) finds them by the
 * folder's owner file, removes them and says what it removed; a live cluster's folder is left alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { kubeUnavailable, networkUnavailable } from '../services/kube.ts';
import { existingSlots, slotAddresses } from '../services/kube/network.ts';
import { sweepDeadClusters, sweepRunFolders } from '../services/kube/sweep.ts';
import { processIdentity } from '../../sidecar/src/invoke/registry/local.ts';

const why = kubeUnavailable() ?? networkUnavailable();
const available = requireService('Kubernetes control plane with a node network', why === undefined, why ?? '');
const ROOT = join(import.meta.dirname, '..', '..');

// what this file's clusters leave when a test fails halfway; only its own folders: a cluster of
// another suite of this run may be starting in the other worker (sweeping the whole run's folders
// here once killed that one's API server)
const mine: string[] = [];
const standIns: ChildProcess[] = [];
afterAll(async () => {
  for (const s of standIns) s.kill('SIGKILL');
  await sweepRunFolders(mine);
});

const processesOf = (dir: string) =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
      } catch {
        return false;
      }
    });

describe.skipIf(!available)('a killed cluster', () => {
  it('is swept by the next start: its processes, node network and folder go, and each removal is said', async () => {
    // a control plane with a node network, owned by a child process that is then killed
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', `const m = await import(${JSON.stringify(join(ROOT, 'test/services/kube/control-plane.ts'))}); const cp = await m.startControlPlane({ podNetwork: true, controllers: false }); console.log(JSON.stringify({ dir: cp.dir, slot: cp.network.slot })); setInterval(() => {}, 1 << 30);`],
      { stdio: ['ignore', 'pipe', 'inherit'], env: process.env },
    );
    const started = await new Promise<{ dir: string; slot: number }>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve(JSON.parse(line) as { dir: string; slot: number });
      });
      child.once('exit', (code) => reject(new Error(`the cluster's owner exited (${code}) before it started`)));
    });
    // other suites' clusters sweep dead runs when they start: until this test sweeps, a live
    // stand-in owns the folder, so theirs leave it to this test
    mine.push(started.dir);
    const standIn = spawn('sleep', ['600'], { stdio: 'ignore' });
    standIns.push(standIn);
    writeFileSync(join(started.dir, 'owner.json'), JSON.stringify({ pid: standIn.pid, startTicks: processIdentity(standIn.pid!)?.startTicks }));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // what the killed run left: etcd and the API server still run, the namespace and veth are there
    expect(processesOf(started.dir).length).toBeGreaterThanOrEqual(2);
    expect(await existingSlots()).toContain(started.slot);
    const netnsPath = `/run/netns/${slotAddresses(started.slot).netns}`;
    // this run's namespace (a parallel suite's cluster may take the slot's names once it is free)
    const inode = statSync(netnsPath).ino;

    standIn.kill('SIGKILL');
    await new Promise((r) => standIn.once('exit', r));
    const said: string[] = [];
    await sweepDeadClusters((s) => said.push(s));
    expect(said.some((s) => /killing leftover .*kube-apiserver/.test(s)), said.join('\n')).toBe(true);
    expect(said.some((s) => /killing leftover .*etcd/.test(s))).toBe(true);
    expect(said).toContain(`removing leftover node network ${slotAddresses(started.slot).netns} (veth ${slotAddresses(started.slot).hostInterface}, its routes)`);
    expect(said).toContain(`removing leftover ${started.dir}`);
    expect(processesOf(started.dir)).toEqual([]);
    expect(existsSync(started.dir)).toBe(false);
    expect(existsSync(netnsPath) ? statSync(netnsPath).ino : undefined).not.toBe(inode);
  }, 180_000);

  it('leaves a live cluster alone', async () => {
    const { startControlPlane, stopControlPlane } = await import('../services/kube/control-plane.ts');
    const cp = await startControlPlane({ podNetwork: true, controllers: false });
    mine.push(cp.dir);
    const inode = statSync(cp.network!.netnsPath).ino;
    try {
      const said: string[] = [];
      await sweepDeadClusters((s) => said.push(s));
      expect(said.filter((s) => s.includes(cp.dir) || s.includes(cp.network!.netns))).toEqual([]);
      expect(await existingSlots()).toContain(cp.network!.slot);
      expect(cp.processes[0].exited).toBe(false);
    } finally {
      await stopControlPlane(cp);
    }
    expect(existsSync(cp.network!.netnsPath) ? statSync(cp.network!.netnsPath).ino : undefined).not.toBe(inode);
  }, 180_000);
});
