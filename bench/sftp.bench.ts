/**
 * SFTP binding throughput: upload (create, base64 JSON) and download (get, streamed bytes) of
 * 1 MB and 100 MB files through a sidecar's HTTP binding API (the sidecar is a child process),
 * against OpenSSH's `sftp` client moving the same files to the same local sshd. Also reports the
 * sidecar's peak RSS during each transfer.
 *
 * Run as root (the sshd test helper switches to a test user): node bench/sftp.bench.ts
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import { startSshd } from '../test/services/sshd.ts';
import { freePort } from '../test/services/net.ts';
import { machineLine, printTable, ratio, rssMb, startChild, type Row } from './lib.ts';

const run = promisify(execFile);
const MB = 1024 * 1024;
const SIZES = [
  { label: '1 MB', bytes: 1 * MB, perRound: 20 },
  { label: '100 MB', bytes: 100 * MB, perRound: 2 },
];
const ROUNDS = 3;

console.log(machineLine());
const server = await startSshd();
const work = await mkdtemp(join(tmpdir(), 'rt-sftp-bench-'));
const httpPort = await freePort();
await writeFile(
  join(work, 'files.yaml'),
  `apiVersion: rt.io/v1alpha1
kind: Component
metadata:
  name: files
spec:
  type: bindings.sftp
  version: v1
  metadata:
    - { name: rootPath, value: "${server.root}" }
    - { name: address, value: "${server.address}" }
    - { name: username, value: "${server.username}" }
    - { name: privateKey, value: "${server.keys.ed25519.path}" }
    - { name: knownHostsFile, value: "${server.knownHostsFile}" }
`,
);
const sidecar = await startChild(
  process.execPath,
  ['cli/rt.ts', 'sidecar', '--app-id', 'bench', '--http-port', String(httpPort), '--grpc-port', String(await freePort()), '--metrics-port', String(await freePort()), '--resources-path', work, '--log-level', 'warn'],
  { readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz` },
);
const url = `http://127.0.0.1:${httpPort}/v1.0/bindings/files`;
const pid = sidecar.proc.pid!;

/** Runs fn while sampling the sidecar's RSS; returns seconds and the peak in MB. */
async function measured(fn: () => Promise<void>): Promise<{ s: number; peakMb: number }> {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssMb(pid));
  }, 10);
  const t0 = performance.now();
  try {
    await fn();
  } finally {
    clearInterval(timer);
  }
  return { s: (performance.now() - t0) / 1000, peakMb: Math.max(peak, rssMb(pid)) };
}

async function binding(body: Buffer | string): Promise<number> {
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  let n = 0;
  for await (const chunk of res.body) n += (chunk as Buffer).length;
  if (res.statusCode >= 300) throw new Error(`binding answered ${res.statusCode}`);
  return n;
}

async function sftpBatch(commands: string[]): Promise<void> {
  const batch = join(work, 'batch');
  await writeFile(batch, commands.join('\n') + '\n');
  await run('sftp', ['-b', batch, '-P', String(server.port), '-i', server.keys.ed25519.path, '-o', `UserKnownHostsFile=${server.knownHostsFile}`, '-o', 'BatchMode=yes', '-o', 'IdentitiesOnly=yes', `${server.username}@127.0.0.1`]);
}

/** Wall time of one sftp batch: the client logs in, runs the commands, logs out. */
async function sftpSeconds(commands: string[]): Promise<number> {
  return (await measured(() => sftpBatch(commands))).s;
}

const rows: Row[] = [];
const best = (xs: number[]) => Math.min(...xs);
try {
  const idleMb = rssMb(pid);
  // the client's login and logout, taken off each client transfer so both sides are timed on a
  // connection that already exists (the sidecar keeps its connection open)
  const logins: number[] = [];
  for (let i = 0; i < 5; i++) logins.push(await sftpSeconds(['pwd']));
  const loginS = best(logins);
  for (const size of SIZES) {
    const content = Buffer.allocUnsafe(size.bytes);
    for (let i = 0; i < content.length; i += 4) content.writeUInt32LE((i * 2654435761) >>> 0, i);
    const local = join(work, `file-${size.bytes}`);
    const remote = `${server.root}/bench/${size.bytes}.bin`;
    await writeFile(local, content);
    await sftpBatch([`-mkdir ${server.root}/bench`, `put ${local} ${remote}`]);
    // the app's request body is built once, outside the timing (it is the app's work)
    const create = Buffer.from(JSON.stringify({ operation: 'create', data: content.toString('base64'), metadata: { fileName: `bench/${size.bytes}.bin` } }));
    const get = JSON.stringify({ operation: 'get', metadata: { fileName: `bench/${size.bytes}.bin` } });
    await binding(get); // warm-up: connection, JIT

    // Rounds alternate the two sides and the best round counts: the machine is shared, and a
    // noisy neighbour should not decide the ratio. Within a round each side moves the file
    // `perRound` times; the client does so in one session and its login time is taken off.
    const t = { up: [] as number[], down: [] as number[], cliUp: [] as number[], cliDown: [] as number[] };
    let downPeak = 0;
    let upPeak = 0;
    const n = size.perRound;
    for (let round = 0; round < ROUNDS; round++) {
      const d = await measured(async () => {
        for (let i = 0; i < n; i++) if ((await binding(get)) !== size.bytes) throw new Error('short download');
      });
      t.down.push(d.s / n);
      downPeak = Math.max(downPeak, d.peakMb);
      t.cliDown.push(((await sftpSeconds(Array.from({ length: n }, () => `get ${remote} ${local}.back`))) - loginS) / n);
    }
    for (let round = 0; round < ROUNDS; round++) {
      const u = await measured(async () => {
        for (let i = 0; i < n; i++) await binding(create);
      });
      t.up.push(u.s / n);
      upPeak = Math.max(upPeak, u.peakMb);
      t.cliUp.push(((await sftpSeconds(Array.from({ length: n }, () => `put ${local} ${remote}`))) - loginS) / n);
    }
    const mbps = (s: number) => size.bytes / MB / s;
    const row = (direction: string, ours: number[], cli: number[], peak: number): Row => ({
      file: size.label,
      direction,
      'binding MB/s': mbps(best(ours)),
      'sftp client MB/s': mbps(best(cli)),
      ratio: ratio(mbps(best(ours)), mbps(best(cli))),
      'sidecar peak RSS MB': peak,
      // what the transfer itself costs: idle RSS is the start-up's share (bench/startup.bench.ts)
      'peak over idle MB': peak - idleMb,
    });
    rows.push(row('download (get)', t.down, t.cliDown, downPeak));
    rows.push(row('upload (create)', t.up, t.cliUp, upPeak));
  }
  printTable(`SFTP binding via HTTP vs OpenSSH sftp client (same local sshd; best of ${ROUNDS} rounds; client login ${(loginS * 1000).toFixed(0)} ms subtracted; sidecar idle RSS ${idleMb.toFixed(0)} MB)`, rows);
} finally {
  await sidecar.stop();
  await server.close();
  await rm(work, { recursive: true, force: true });
}
