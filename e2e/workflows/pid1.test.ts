/**
 * `rt sidecar` as PID 1 of its own PID namespace (as in a container), killed with -9 while
 * workflows have activities in flight, and started again at once on the same data dir. A
 * restarted PID 1 has the same pid as the dead one, and a dead process that is not yet reaped
 * (a zombie) still "exists" for kill(pid, 0): neither may make the new sidecar think the data
 * dir belongs to someone else. Every instance must resume: the activities that were in flight
 * are dispatched again, and every workflow completes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { waitForPort } from '../../test/services/net.ts';
import { ROOT } from '../rt-process.ts';
import { killed, lines, quietSdkLogs, startWorker, waitUntil } from './harness.ts';

// --kill-child: rt dies with its unshare parent, so nothing outlives the suite
const UNSHARE = ['--pid', '--fork', '--kill-child', '--mount-proc'];
const unshareWorks = spawnSync('unshare', [...UNSHARE, 'true']).status === 0;
const available = requireService('unshare', unshareWorks, 'needs util-linux unshare and root (CAP_SYS_ADMIN) for a PID namespace');

/** One `unshare … node cli/rt.ts sidecar` run: the unshare process and rt's output. */
interface Pid1Sidecar {
  unshare: ChildProcess;
  out(): string;
}

let dataDir: string;
let restore: () => void;
const procs: ChildProcess[] = [];
/** Host pids of every rt started, killed at the end whatever happened to their unshare. */
const rtPids: number[] = [];

/**
 * A free port below the kernel's ephemeral range. The restarted sidecar binds the dead one's
 * ports again; a port from freePort() (ephemeral) could be handed to another suite running in
 * parallel during the gap, and the test would then talk to that suite's server.
 */
async function portOutsideEphemeralRange(): Promise<number> {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const top = Math.max(11_000, Math.min(low, 32_768));
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * (top - 10_000));
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '0.0.0.0', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/**
 * Both ports answer (HTTP may open before gRPC), and a live sidecar serves HTTP. A port that
 * accepts is not enough: until the kernel has released a killed process's files (which can lag
 * behind its becoming a zombie), its listening sockets still complete handshakes, and then
 * reset those connections.
 */
async function ready(s: Pid1Sidecar, httpPort: number, grpcPort: number): Promise<void> {
  try {
    await waitForPort('127.0.0.1', httpPort, 30_000);
    await waitForPort('127.0.0.1', grpcPort, 10_000);
    await waitUntil(
      () => fetch(`http://127.0.0.1:${httpPort}/v1.0/healthz`, { signal: AbortSignal.timeout(1000) }).then((r) => r.ok, () => false),
      30_000,
      'the sidecar to answer /v1.0/healthz',
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}\nrt printed:\n${s.out()}`);
  }
}

function startPid1Sidecar(appId: string, httpPort: number, grpcPort: number): Pid1Sidecar {
  const args = [...UNSHARE, process.execPath, join(ROOT, 'cli/rt.ts'), 'sidecar', '--app-id', appId];
  args.push('--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', dataDir, '--log-level', process.env.RT_TEST_LOG ?? 'info');
  // its own RT_HOME: a sidecar killed as PID 1 leaves its registry entry behind, and pid 1 is alive
  // to every later reader on the host, so the entry would never be pruned from ~/.rt
  const unshare = spawn('unshare', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RT_HOME: join(dataDir, 'home') } });
  procs.push(unshare);
  let out = '';
  unshare.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  unshare.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { unshare, out: () => out };
}

/** The host pid of rt: the only child of `unshare --fork`, PID 1 inside the namespace. */
function rtPid(s: Pid1Sidecar): number {
  const pid = s.unshare.pid!;
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  if (children.length !== 1) throw new Error(`unshare ${pid} (exit ${s.unshare.exitCode ?? s.unshare.signalCode}) has children [${children.join(', ')}]; rt printed:\n${s.out()}`);
  const rt = Number(children[0]);
  if (!rtPids.includes(rt)) rtPids.push(rt);
  return rt;
}

function procState(pid: number): string {
  try {
    return /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '?';
  } catch {
    return 'gone';
  }
}

beforeAll(() => {
  restore = quietSdkLogs();
  dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-pid1-'));
});

afterAll(async () => {
  for (const pid of rtPids) {
    try {
      // only if that pid is still our rt (a pid can be reused once its process is gone)
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir)) process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (const p of procs) {
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGCONT');
    await killed(p);
  }
  rmSync(dataDir, { recursive: true, force: true });
  restore?.();
});

/**
 * Starts N `resilient` workflows (quick → 2 slow activities + a timer → quick) on a sidecar
 * running as PID 1, kills it with -9 while the slow activities run, then restarts it (after
 * `beforeRestart`) and expects every instance to complete with the right output.
 */
async function killAndRestart(appId: string, beforeRestart: (old: Pid1Sidecar) => Promise<void>): Promise<void> {
  const [httpPort, grpcPort] = [await portOutsideEphemeralRange(), await portOutsideEphemeralRange()];
  const address = `127.0.0.1:${grpcPort}`;
  const markers = mkdtempSync(join(tmpdir(), 'rt-wf-pid1-markers-'));
  const first = startPid1Sidecar(appId, httpPort, grpcPort);
  await ready(first, httpPort, grpcPort);
  expect(readFileSync(`/proc/${rtPid(first)}/status`, 'utf8'), 'rt runs as PID 1 of its namespace').toMatch(/^NSpid:\s+\d+\s+1$/m);
  let worker = startWorker(address, markers, { SLOW_MS: '3000', TIMER_S: '2' });
  procs.push(worker);
  const client = new TaskHubGrpcClient(address);
  // a client of its own for after the restart: the first one's connection died with the old sidecar
  let after: TaskHubGrpcClient | undefined;
  let second: Pid1Sidecar | undefined;
  try {
    const ids = ['a', 'b', 'c'].map((s) => `${appId}-${s}`);
    for (const [i, id] of ids.entries()) await client.scheduleNewOrchestration('resilient', i + 1, id);
    await waitUntil(() => lines(markers, 'slow').length >= 2 * ids.length, 30_000, 'every slow activity to start');

    // the app dies with it (a pod restart): only the restarted sidecar's own records can bring
    // back the activities that were in flight
    await killed(worker);
    await beforeRestart(first);
    second = startPid1Sidecar(appId, httpPort, grpcPort);
    await ready(second, httpPort, grpcPort);
    rtPid(second); // noted for the cleanup
    worker = startWorker(address, markers, { SLOW_MS: '100', TIMER_S: '2' });
    procs.push(worker);
    const rt2 = rtPids[rtPids.length - 1];
    const seen = () =>
      `quick ${lines(markers, 'quick')}, slow ${lines(markers, 'slow')}; restarted rt ${rt2} is ${procState(rt2)}, its unshare exited ${second?.unshare.exitCode ?? second?.unshare.signalCode}\nrt printed:\n${second?.out()}`;
    after = new TaskHubGrpcClient(address);
    const states = await Promise.all(ids.map((id) => after!.waitForOrchestrationCompletion(id, true, 40))).catch((e: Error) => {
      throw new Error(`${e.message}; ${seen()}`);
    });
    for (const [i, st] of states.entries()) {
      expect(st?.runtimeStatus, `${ids[i]}: ${st?.failureDetails?.message ?? ''} ${seen()}`).toBe(OrchestrationStatus.COMPLETED);
      // quick(n) = n+1; slow = 10·(n+1) + 10·(n+2); quick(that) = 20n + 31
      expect(JSON.parse(st?.serializedOutput ?? 'null'), seen()).toBe(20 * (i + 1) + 31);
    }
    expect(lines(markers, 'slow').length, `the slow activities ran again: ${seen()}`).toBeGreaterThanOrEqual(4 * ids.length);
    expect(second.out(), 'the restarted sidecar owns the data dir').not.toMatch(/another sidecar of this app uses the same data dir/);
  } finally {
    await client.stop();
    await after?.stop();
    await killed(worker);
    if (second) await killed(second.unshare);
    rmSync(markers, { recursive: true, force: true });
  }
}

describe.skipIf(!available)('rt as PID 1, killed with -9 and restarted at once', () => {
  it('resumes every instance after the old PID 1 was reaped', async () => {
    await killAndRestart('wf-pid1', async (old) => {
      const rt = rtPid(old);
      process.kill(rt, 'SIGKILL');
      // unshare reaps its child and exits with it
      await new Promise<void>((r) => (old.unshare.exitCode !== null || old.unshare.signalCode !== null ? r() : old.unshare.once('exit', () => r())));
      expect(procState(rt)).toBe('gone');
    });
  }, 120_000);

  it('resumes every instance while the old PID 1 is still a zombie', async () => {
    await killAndRestart('wf-pid1-zombie', async (old) => {
      const rt = rtPid(old);
      old.unshare.kill('SIGSTOP'); // a stopped parent cannot reap: rt stays a zombie
      process.kill(rt, 'SIGKILL');
      await waitUntil(() => procState(rt) === 'Z', 10_000, `rt (${rt}) to become a zombie`);
    });
  }, 120_000);
});
