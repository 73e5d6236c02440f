/**
 * Child processes of a test cluster: each logs to a file in the run folder (read the tail when
 * something fails), and stops with SIGTERM, then SIGKILL after a grace period.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ClusterProcess {
  name: string;
  proc: ChildProcess;
  logFile: string;
  /** The last lines of its log. */
  tail(chars?: number): string;
  exited: boolean;
  stop(graceMs?: number): Promise<void>;
}

export function startProcess(dir: string, name: string, command: string, args: string[], env: NodeJS.ProcessEnv = {}): ClusterProcess {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  const proc = spawn(command, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...env }, cwd: dir });
  closeSync(fd);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const p: ClusterProcess = {
    name,
    proc,
    logFile,
    exited: false,
    tail(chars = 3000) {
      try {
        return readFileSync(logFile, 'utf8').slice(-chars);
      } catch {
        return '';
      }
    },
    async stop(graceMs = 10_000) {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(t);
      }
    },
  };
  void exited.then(() => (p.exited = true));
  return p;
}

/** Polls `check` until it returns true; on timeout throws with `describe()` (e.g. a log tail). */
export async function pollUntil(what: string, check: () => Promise<boolean>, timeoutMs: number, describe: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms. ${describe()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
