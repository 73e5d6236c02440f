/**
 * SFTP binding throughput: upload (create, base64 JSON) and download (get, streamed bytes) of
 * 1 MB and 100 MB files through a sidecar's HTTP binding API (the sidecar is a child process),
 * against OpenSSH's `sftp` client moving the same files to the same local sshd.
 *
 * The sidecar measured is the compiled bundle, as the rt image and `npm run build` run it (`node
 * dist/cli/rt.js`), built from the current sources into a temporary folder first (buildRt).
 * Memory is measured apart, each row in a fresh sidecar doing only 100 MB uploads (or downloads):
 * the bundle; the bundle with V8's young generation capped at 1 MB (`--max-semi-space-size=1`,
 * which V8 reads only at process start); the TypeScript sources (`node cli/rt.ts`, what the tests
 * run). Peak RSS is the kernel's high-water mark (VmHWM, reset before each round through
 * /proc/<pid>/clear_refs); what it was made of comes from process.memoryUsage() sampled in the
 * sidecar every 10 ms (bench/memory-sampler.ts).
 *
 * Run as root (the sshd test helper switches to a test user): node bench/sftp.bench.ts
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import { startSshd } from '../test/services/sshd.ts';
import { freePort } from '../test/services/net.ts';
import { buildRt, machineLine, printTable, ratio, rssMb, startChild, type Child, type Row } from './lib.ts';
import { SAMPLER, samplesBetween, type MemorySample } from './memory-sampler.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const MB = 1024 * 1024;
const SIZES = [
  { label: '1 MB', bytes: 1 * MB, perRound: 20 },
  { label: '100 MB', bytes: 100 * MB, perRound: 2 },
];
const ROUNDS = 3;

console.log(machineLine());
const server = await startSshd();
const work = await mkdtemp(join(tmpdir(), 'rt-sftp-bench-'));

/** Peak RSS since the last reset, in MB: the kernel's high-water mark, or NaN without one. */
function peakMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Resets the high-water mark to the current RSS; false where the kernel does not let us. */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

interface Sidecar {
  label: string;
  child: Child;
  pid: number;
  url: string;
  samples: string;
}

async function startSidecar(label: string, entry: string, nodeOptions = ''): Promise<Sidecar> {
  const httpPort = await freePort();
  const samples = join(work, `memory-${httpPort}.txt`);
  const child = await startChild(
    process.execPath,
    [entry, 'sidecar', '--app-id', 'bench', '--http-port', String(httpPort), '--grpc-port', String(await freePort()), '--metrics-port', String(await freePort()), '--resources-path', join(work, 'resources'), '--log-level', 'warn'],
    {
      readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz`,
      env: { NODE_OPTIONS: `--import=${SAMPLER} ${nodeOptions}`.trim(), RT_BENCH_MEMORY_SAMPLES: samples },
    },
  );
  await new Promise((r) => setTimeout(r, 1000)); // settled: start-up's garbage collected
  return { label, child, pid: child.proc.pid!, url: `http://127.0.0.1:${httpPort}/v1.0/bindings/files`, samples };
}

interface Measured {
  s: number;
  peakMb: number;
  /** The memoryUsage() sample with the highest RSS during the run. */
  top: MemorySample | undefined;
}

/** Runs fn, timing it and taking the sidecar's peak RSS over it. */
async function measured(car: Sidecar | undefined, fn: () => Promise<void>): Promise<Measured> {
  const hwm = car ? resetPeak(car.pid) : false;
  let sampled = car ? rssMb(car.pid) : 0;
  const timer = car && !hwm ? setInterval(() => (sampled = Math.max(sampled, rssMb(car.pid))), 10) : undefined;
  const from = Date.now();
  const t0 = performance.now();
  try {
    await fn();
  } finally {
    clearInterval(timer);
  }
  const s = (performance.now() - t0) / 1000;
  if (!car) return { s, peakMb: 0, top: undefined };
  const peak = hwm ? peakMb(car.pid) : Math.max(sampled, rssMb(car.pid));
  await new Promise((r) => setTimeout(r, 30)); // the sampler's last lines
  const top = samplesBetween(readFileSync(car.samples, 'utf8'), from, Date.now()).reduce<MemorySample | undefined>((a, b) => (a && a.rss >= b.rss ? a : b), undefined);
  return { s, peakMb: peak, top };
}

async function binding(car: Sidecar, body: Buffer | string): Promise<number> {
  const res = await request(car.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
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
  return (await measured(undefined, () => sftpBatch(commands))).s;
}

const best = (xs: number[]) => Math.min(...xs);
const mb = (bytes: number | undefined) => (bytes === undefined ? Number.NaN : bytes / MB);

/** A fresh sidecar's memory over rounds of one 100 MB operation. */
interface OperationMemory {
  label: string;
  operation: string;
  idleMb: number;
  /** Seconds per transfer, per round. */
  s: number[];
  rounds: Measured[];
}

function memoryRow(u: OperationMemory): Row {
  const worst = u.rounds.reduce((a, b) => (a.peakMb >= b.peakMb ? a : b));
  return {
    sidecar: u.label,
    '100 MB': u.operation,
    'MB/s (best)': 100 / best(u.s),
    'idle RSS MB': u.idleMb,
    'peak RSS MB per round': u.rounds.map((p) => p.peakMb.toFixed(0)).join(' / '),
    'peak over idle MB': worst.peakMb - u.idleMb,
    // process.memoryUsage() where the sampled RSS was highest in the worst round
    'sampled: RSS': mb(worst.top?.rss),
    'V8 heap total': mb(worst.top?.heapTotal),
    'heap used': mb(worst.top?.heapUsed),
    external: mb(worst.top?.external),
    'of which ArrayBuffers': mb(worst.top?.arrayBuffers),
  };
}

const content = Buffer.allocUnsafe(100 * MB);
for (let i = 0; i < content.length; i += 4) content.writeUInt32LE((i * 2654435761) >>> 0, i);
const started: Sidecar[] = [];
const sizes = SIZES.map((size) => {
  const bytes = content.subarray(0, size.bytes);
  const local = join(work, `file-${size.bytes}`);
  const remote = `${server.root}/bench/${size.bytes}.bin`;
  // the app's request body is built once, outside the timing (it is the app's work)
  const create = Buffer.from(JSON.stringify({ operation: 'create', data: bytes.toString('base64'), metadata: { fileName: `bench/${size.bytes}.bin` } }));
  const get = JSON.stringify({ operation: 'get', metadata: { fileName: `bench/${size.bytes}.bin` } });
  return { ...size, bytes: size.bytes, data: bytes, local, remote, create, get };
});

/** A fresh sidecar doing only `operation` on the 100 MB file, ROUNDS rounds of `perRound`. */
async function operationMemory(label: string, entry: string, nodeOptions: string, operation: 'create' | 'get'): Promise<OperationMemory> {
  const size = sizes[1]!;
  const car = await startSidecar(label, entry, nodeOptions);
  started.push(car);
  try {
    await binding(car, sizes[0]![operation]); // warm-up with the 1 MB file: connection, JIT
    const u: OperationMemory = { label, operation, idleMb: rssMb(car.pid), s: [], rounds: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const m = await measured(car, async () => {
        for (let i = 0; i < size.perRound; i++) {
          const n = await binding(car, size[operation]);
          if (operation === 'get' && n !== size.bytes) throw new Error('short download');
        }
      });
      u.s.push(m.s / size.perRound);
      u.rounds.push(m);
    }
    return u;
  } finally {
    await car.child.stop();
  }
}

const rows: Row[] = [];
try {
  const entry = buildRt(work);
  const resources = join(work, 'resources');
  await mkdir(resources);
  await writeFile(
    join(resources, 'files.yaml'),
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
  for (const size of sizes) {
    await writeFile(size.local, size.data);
    await sftpBatch([`-mkdir ${server.root}/bench`, `put ${size.local} ${size.remote}`]);
  }

  const car = await startSidecar('compiled (node dist/cli/rt.js), as the image runs it', entry);
  started.push(car);
  // the client's login and logout, taken off each client transfer so both sides are timed on a
  // connection that already exists (the sidecar keeps its connection open)
  const logins: number[] = [];
  for (let i = 0; i < 5; i++) logins.push(await sftpSeconds(['pwd']));
  const loginS = best(logins);
  for (const size of sizes) {
    await binding(car, sizes[0]!.get); // warm-up: connection, JIT

    // Rounds alternate the two sides and the best round counts: the machine is shared, and a
    // noisy neighbour should not decide the ratio. Within a round each side moves the file
    // `perRound` times; the client does so in one session and its login time is taken off.
    const t = { up: [] as number[], down: [] as number[], cliUp: [] as number[], cliDown: [] as number[] };
    const n = size.perRound;
    for (let round = 0; round < ROUNDS; round++) {
      const d = await measured(car, async () => {
        for (let i = 0; i < n; i++) if ((await binding(car, size.get)) !== size.bytes) throw new Error('short download');
      });
      t.down.push(d.s / n);
      t.cliDown.push(((await sftpSeconds(Array.from({ length: n }, () => `get ${size.remote} ${size.local}.back`))) - loginS) / n);
    }
    for (let round = 0; round < ROUNDS; round++) {
      const u = await measured(car, async () => {
        for (let i = 0; i < n; i++) await binding(car, size.create);
      });
      t.up.push(u.s / n);
      t.cliUp.push(((await sftpSeconds(Array.from({ length: n }, () => `put ${size.local} ${size.remote}`))) - loginS) / n);
    }
    const mbps = (s: number) => size.bytes / MB / s;
    const row = (direction: string, ours: number[], cli: number[]): Row => ({
      file: size.label,
      direction,
      'binding MB/s': mbps(best(ours)),
      'sftp client MB/s': mbps(best(cli)),
      ratio: ratio(mbps(best(ours)), mbps(best(cli))),
    });
    rows.push(row('download (get)', t.down, t.cliDown));
    rows.push(row('upload (create)', t.up, t.cliUp));
  }
  printTable(`SFTP binding via HTTP vs OpenSSH sftp client (same local sshd; best of ${ROUNDS} rounds; client login ${(loginS * 1000).toFixed(0)} ms subtracted; sidecar: ${car.label})`, rows);
  await car.child.stop();

  // Memory, each in a fresh sidecar: RSS that an earlier transfer left (freed memory the allocator
  // keeps) would otherwise count in the next one's peak.
  const compiled = 'compiled, as the image runs it';
  const memory = [
    await operationMemory(compiled, entry, '', 'create'),
    await operationMemory(compiled, entry, '', 'get'),
    await operationMemory('compiled, NODE_OPTIONS=--max-semi-space-size=1', entry, '--max-semi-space-size=1', 'create'),
    await operationMemory('sources (node cli/rt.ts), as the tests run it', join(ROOT, 'cli', 'rt.ts'), '', 'create'),
  ];
  printTable(`the sidecar's memory over 100 MB transfers, each in a fresh sidecar (${ROUNDS} rounds of ${sizes[1]!.perRound}; peak = VmHWM per round, breakdown = process.memoryUsage() at the highest sampled RSS of the worst round)`, memory.map(memoryRow));
} finally {
  for (const c of started) await c.child.stop();
  await server.close();
  await rm(work, { recursive: true, force: true });
}
