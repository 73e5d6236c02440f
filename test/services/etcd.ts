/**
 * A real etcd for tests: RT_TEST_ETCD_ENDPOINTS (comma-separated host:port) when set, else
 * the system's /usr/bin/etcd (Debian etcd-server) started on free loopback ports with a
 * temporary data dir. `stop()` kills it and removes the dir.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from './net.ts';

export interface EtcdTarget {
  available: boolean;
  /** Why it is not available (for requireService). */
  why: string;
  endpoints: string[];
  stop(): Promise<void>;
}

const ETCD_BIN = process.env.RT_TEST_ETCD_BIN || '/usr/bin/etcd';

/** `tls`: serve clients over https with this certificate and key (PEM files). */
/** `dataDir`: use this (empty) folder for its data instead of a new temp folder. */
export async function startEtcd(opts: { tls?: { certFile: string; keyFile: string }; dataDir?: string } = {}): Promise<EtcdTarget> {
  const fromEnv = process.env.RT_TEST_ETCD_ENDPOINTS;
  if (fromEnv && !opts.tls && !opts.dataDir) return { available: true, why: '', endpoints: fromEnv.split(',').map((s) => s.trim()), stop: async () => {} };
  if (!existsSync(ETCD_BIN)) return { available: false, why: `${ETCD_BIN} not found (install etcd-server or set RT_TEST_ETCD_ENDPOINTS)`, endpoints: [], stop: async () => {} };

  const dir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'rt-etcd-'));
  const client = await freePort();
  const scheme = opts.tls ? 'https' : 'http';
  const peer = await freePort();
  const proc: ChildProcess = spawn(
    ETCD_BIN,
    [
      '--name', 'rt-test',
      '--data-dir', dir,
      '--listen-client-urls', `${scheme}://127.0.0.1:${client}`,
      '--advertise-client-urls', `${scheme}://127.0.0.1:${client}`,
      ...(opts.tls ? ['--cert-file', opts.tls.certFile, '--key-file', opts.tls.keyFile] : []),
      '--listen-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-cluster', `rt-test=http://127.0.0.1:${peer}`,
      // tests do not need durability across power cuts; skip fsync waits on a busy 2-core box
      '--unsafe-no-fsync',
      '--log-level', 'error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort('127.0.0.1', client, 15_000);
  } catch {
    await stop();
    return { available: false, why: `etcd did not start: ${stderr.trim().slice(-500)}`, endpoints: [], stop: async () => {} };
  }
  return { available: true, why: '', endpoints: [`127.0.0.1:${client}`], stop };
}
