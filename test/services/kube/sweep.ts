/**
 * The last line of cleanup: finds processes that a test cluster started (their command line
 * names a run folder, rt-kube-run-*) and mounts under such folders, kills and unmounts them,
 * and removes the folders. Suites clean up after themselves; this catches a worker that was
 * killed before its afterAll ran.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUN_DIR_PREFIX } from './control-plane.ts';
import { removeCgroupRoot } from './node.ts';

export function sweepKubeLeftovers(log: (s: string) => void = () => {}): void {
  const marker = join(tmpdir(), RUN_DIR_PREFIX);
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (!cmdline.includes(marker) || Number(pid) === process.pid) continue;
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
    .filter((m) => m?.startsWith(marker))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    log(`unmounting leftover ${m}`);
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
  const cgroups = '/sys/fs/cgroup/pids';
  if (existsSync(cgroups)) {
    for (const d of readdirSync(cgroups).filter((d) => d.startsWith(RUN_DIR_PREFIX))) {
      log(`removing leftover cgroups ${d}`);
      removeCgroupRoot(d);
    }
  }
  for (const d of readdirSync(tmpdir()).filter((d) => d.startsWith(RUN_DIR_PREFIX))) {
    log(`removing leftover ${join(tmpdir(), d)}`);
    rmSync(join(tmpdir(), d), { recursive: true, force: true });
  }
}
