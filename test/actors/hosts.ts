/** Actor hosts as their own processes (remote-host.ts), for the suites that kill one or read what it loaded. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { ActorAppLog } from './app.ts';

const HOST_SCRIPT = join(import.meta.dirname, 'remote-host.ts');

export interface Host {
  name: string;
  proc: ChildProcess;
  http: number;
  grpc: number;
  base: string;
  log(): Promise<ActorAppLog>;
  modules(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Starts remote-host.ts; resolves with its ports once its sidecar serves. */
export async function startHost(name: string, settings: Record<string, unknown>, env: Record<string, string> = {}): Promise<Host> {
  const proc = spawn(process.execPath, [HOST_SCRIPT], { env: { ...process.env, ...env, RT_TEST_HOST: JSON.stringify(settings) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const first = await new Promise<{ http: number; grpc: number; logPort: number }>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`host ${name} did not start in 60 s: ${err}`)), 60_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      resolve(JSON.parse(out.slice(0, nl)));
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`host ${name} exited with ${code}: ${err}`));
    });
  });
  const get = async <T>(path: string) => (await (await fetch(`http://127.0.0.1:${first.logPort}${path}`)).json()) as T;
  return {
    name,
    proc,
    http: first.http,
    grpc: first.grpc,
    base: `http://127.0.0.1:${first.http}`,
    log: () => get<ActorAppLog>('/log'),
    modules: () => get<string[]>('/modules'),
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

/**
 * Resolves once every host is in placement's table: echo calls of Counter actors through `via`
 * (warm-0 … warm-15) have reached the app of each of `all`. 30 s at most.
 */
export async function untilShared(via: Host, all: Host[]): Promise<void> {
  const end = Date.now() + 30_000;
  for (let i = 0; ; i++) {
    const r = await fetch(`${via.base}/v1.0/actors/Counter/warm-${i % 16}/method/echo`, { method: 'PUT', body: 'w' });
    if (r.status === 200 && (await Promise.all(all.map(async (h) => (await h.log()).calls.length > 0))).every(Boolean)) return;
    if (Date.now() > end) throw new Error(`the hosts never shared the actors: last answer ${r.status} ${await r.text()}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
