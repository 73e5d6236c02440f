/**
 * The real `rt` CLI as a child process, for end-to-end suites: its combined output, its exit
 * code, a graceful stop, and waiting for something it prints.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..');
const RT = join(ROOT, 'cli/rt.ts');

export interface RtProcess {
  proc: ChildProcess;
  /** stdout and stderr so far. */
  out(): string;
  /** The exit code (null when killed by a signal). */
  exit: Promise<number | null>;
  /** SIGTERM (when still running), then wait for the exit. */
  stop(): Promise<number | null>;
}

/** Runs `node cli/rt.ts <args>` from the repo root with extra env. */
export function runRt(args: string[], env: NodeJS.ProcessEnv = {}): RtProcess {
  const proc = spawn(process.execPath, [RT, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return {
    proc,
    out: () => out,
    exit,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exit;
    },
  };
}

/** Waits until check() holds; fails early, with rt's output, when rt has exited. */
export async function until(run: RtProcess, check: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end || run.proc.exitCode !== null) throw new Error(`condition not met; rt printed:\n${run.out()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
