/**
 * One way to run a private server for the tests (Redis, PostgreSQL): spawn it, wait until its
 * loopback port accepts connections, and on `stop()` end it and remove its folders. A server
 * that exits before it is ready is reported with the tail of its output.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { rmSync } from 'node:fs';
import { waitForPort } from './net.ts';
import { markOwner } from './temp-sweep.ts';

export interface StartedServer {
  /** How clients reach it (redis://…, postgres://…). */
  url: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export interface ServerSpec {
  name: string;
  command: string;
  args: string[];
  port: number;
  url: string;
  /** Folders it owns, removed on stop. */
  dirs: string[];
  spawnOptions?: SpawnOptions;
  /** Signal that stops it quickly and cleanly (default SIGTERM). */
  stopSignal?: NodeJS.Signals;
  readyTimeoutMs?: number;
}

export async function startServerProcess(spec: ServerSpec): Promise<StartedServer> {
  const proc: ChildProcess = spawn(spec.command, spec.args, { ...spec.spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-4000));
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  // a run killed before stop() leaves the folder: the next run's sweep removes it (temp-sweep.ts)
  for (const d of spec.dirs) if (proc.pid !== undefined) markOwner(d, proc.pid);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill(spec.stopSignal ?? 'SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
    for (const d of spec.dirs) rmSync(d, { recursive: true, force: true });
  };
  const failedEarly = exited.then(() => {
    throw new Error(`${spec.name} exited before it was ready: ${output.trim().slice(-800)}`);
  });
  try {
    await Promise.race([waitForPort('127.0.0.1', spec.port, spec.readyTimeoutMs ?? 30_000), failedEarly]);
  } catch (e) {
    await stop();
    throw e instanceof Error && e.message.startsWith(spec.name) ? e : new Error(`${spec.name} did not start: ${(e as Error).message}; ${output.trim().slice(-800)}`);
  }
  failedEarly.catch(() => {});
  return { url: spec.url, port: spec.port, pid: proc.pid ?? -1, stop };
}
