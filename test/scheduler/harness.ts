/** Scheduler processes for the reliability suites: `node cli/rt.ts scheduler …` as real children. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitForPort } from '../services/net.ts';

const RT = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));

export interface SchedulerProc {
  proc: ChildProcess;
  port: number;
  address: string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function spawnScheduler(port: number, args: string[]): Promise<SchedulerProc> {
  const proc = spawn(process.execPath, [RT, 'scheduler', '--port', String(port), '--log-level', process.env.RT_TEST_LOG ?? 'warn', ...args], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill(signal);
    await exited;
  };
  try {
    await waitForPort('127.0.0.1', port, 20_000);
  } catch (e) {
    await kill();
    throw e;
  }
  return { proc, port, address: `127.0.0.1:${port}`, kill };
}
