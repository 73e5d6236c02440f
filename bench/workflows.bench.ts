/**
 * Workflow throughput: a durabletask-js worker (in this process) against an `rt sidecar`
 * child process (the compiled build, as the image runs it; BENCH_SOURCES=1 runs the sources), for a 3-activity chain and a 10-activity fan-out, on the embedded SQLite
 * store and on PostgreSQL (when 127.0.0.1:5432 answers). Closed loop: BENCH_CONCURRENCY
 * (256) workflows in flight, or one at a time for the "in series" row; each timed from
 * StartInstance to WaitForInstanceCompletion's answer.
 *
 * Anchor: the Go runtime's published figures (cluster): ~98 workflows/s in parallel,
 * 57/s in series, 35/s at 10,000 workflows, each with activities.
 *
 *   node bench/workflows.bench.ts            (BENCH_SECONDS, BENCH_CONCURRENCY to change)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient, TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { whenAll } from '@dapr/durabletask-js/task/index.js';
import { freePort, canConnect } from '../test/services/net.ts';
import { buildRt, machineLine, percentile, printTable, ratio, rssMb, startChild, type Row } from './lib.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 256);
const ANCHOR_PARALLEL = 98;
const ANCHOR_SERIES = 57;
const PG_URL = process.env.RT_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';

// the SDK logs every work item; keep the benchmark's own output
const print = console.log.bind(console);
console.log = () => undefined;
console.info = () => undefined;
console.warn = () => undefined;
console.error = () => undefined;

const step = async (_: unknown, n: number) => n + 1;
const chain3 = async function* (ctx: any, n: number): any {
  const a = yield ctx.callActivity('step', n);
  const b = yield ctx.callActivity('step', a);
  return yield ctx.callActivity('step', b);
};
const fanOut10 = async function* (ctx: any, n: number): any {
  const tasks = [];
  for (let i = 0; i < 10; i++) tasks.push(ctx.callActivity('step', n + i));
  const r: number[] = yield whenAll(tasks);
  return r.length;
};

interface Measured {
  wfs: number;
  p50: number;
  p99: number;
  done: number;
  errors: number;
}

async function drive(client: TaskHubGrpcClient, name: string, seconds: number, concurrency = CONCURRENCY): Promise<Measured> {
  const lat: number[] = [];
  let errors = 0;
  let i = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          const id = await client.scheduleNewOrchestration(name, i++);
          const st = await client.waitForOrchestrationCompletion(id, false, 60).catch(async (e) => {
            if (process.env.BENCH_DEBUG) {
              const now = await client.getOrchestrationState(id, false).catch(() => undefined);
              process.stderr.write(`stuck ${id}: status now ${now?.runtimeStatus} (${e})\n`);
            }
            throw e;
          });
          if (st?.runtimeStatus !== 1) errors++;
        } catch {
          errors++;
        }
        lat.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  return { wfs: lat.length / elapsed, p50: percentile(lat, 50), p99: percentile(lat, 99), done: lat.length, errors };
}

/** CPU time (user + system) a process used so far, in ms (Linux /proc). */
function procCpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

async function runStore(store: 'SQLite' | 'PostgreSQL'): Promise<Row[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-bench-'));
  // the compiled sidecar, as the image runs it (BENCH_SOURCES=1: the TypeScript sources)
  const entry = process.env.BENCH_SOURCES === '1' ? 'cli/rt.ts' : buildRt(dataDir);
  const args = [entry, 'sidecar', '--app-id', 'wfbench', '--data-dir', dataDir, '--log-level', 'warn'];
  const table = `wf_bench_${process.pid}`;
  if (store === 'PostgreSQL') {
    writeFileSync(
      join(dataDir, 'pg.yaml'),
      `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: wfstore\nspec:\n  type: state.postgresql\n  version: v1\n  metadata:\n  - name: connectionString\n    value: "${PG_URL}"\n  - name: tableName\n    value: ${table}\n  - name: actorStateStore\n    value: "true"\n`,
    );
    args.push('--resources-path', join(dataDir, 'pg.yaml'));
  }
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  args.push('--http-port', String(httpPort), '--grpc-port', String(grpcPort));
  const child = await startChild(process.execPath, args, { readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz`, env: process.env.BENCH_CHILD_PROFILE ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_CHILD_PROFILE}` } : {} });
  const address = `127.0.0.1:${grpcPort}`;
  const worker = new TaskHubGrpcWorker(address);
  worker.addNamedOrchestrator('chain3', chain3);
  worker.addNamedOrchestrator('fanOut10', fanOut10);
  worker.addNamedActivity('step', step);
  await worker.start();
  const client = new TaskHubGrpcClient(address);
  const rows: Row[] = [];
  try {
    await drive(client, 'chain3', 2); // warm-up
    for (const [name, label, inFlight, anchor] of [
      ['chain3', '3-activity chain, parallel', CONCURRENCY, ANCHOR_PARALLEL],
      ['fanOut10', '10-activity fan-out, parallel', CONCURRENCY, ANCHOR_PARALLEL],
      ['chain3', '3-activity chain, in series', 1, ANCHOR_SERIES],
    ] as const) {
      const cpu0 = process.cpuUsage();
      const child0 = procCpuMs(child.proc.pid as number);
      const m = await drive(client, name, SECONDS, inFlight);
      const cpu = process.cpuUsage(cpu0);
      const childMs = procCpuMs(child.proc.pid as number) - child0;
      rows.push({
        workflow: label,
        store,
        'rt wf/s': m.wfs,
        'p50 ms': m.p50,
        'p99 ms': m.p99,
        'in flight': inFlight,
        'anchor wf/s (Go)': anchor,
        ratio: ratio(m.wfs, anchor),
        completed: m.done,
        errors: m.errors,
        'sidecar CPU %': (childMs / (SECONDS * 1000)) * 100,
        'worker+client CPU %': ((cpu.user + cpu.system) / 1000 / (SECONDS * 1000)) * 100,
        // CPU per workflow does not depend on how busy the shared machine is
        'sidecar CPU ms/wf': childMs / Math.max(1, m.done),
        'worker CPU ms/wf': (cpu.user + cpu.system) / 1000 / Math.max(1, m.done),
        'sidecar RSS MB': rssMb(child.proc.pid as number),
      });
    }
  } finally {
    await worker.stop().catch(() => undefined);
    await client.stop().catch(() => undefined);
    await child.stop();
    if (store === 'PostgreSQL') {
      const pg = (await import('pg')).default;
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP TABLE IF EXISTS "${table}"`).catch(() => undefined);
      await c.end();
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
  return rows;
}

print(machineLine());
print(`load average at start: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
print(`closed loop: ${CONCURRENCY} workflows in flight (parallel) or 1 (in series), ${SECONDS} s per row; worker = @dapr/durabletask-js in the benchmark process; sidecar = rt sidecar child process`);
const rows = process.env.BENCH_PG_ONLY ? [] : await runStore('SQLite');
const pgUrl = new URL(PG_URL);
if (!process.env.BENCH_SQLITE_ONLY && await canConnect(pgUrl.hostname, Number(pgUrl.port || 5432))) rows.push(...(await runStore('PostgreSQL')));
else print('PostgreSQL not reachable: its rows are left out');
console.log = print;
print(`load average at end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
printTable('Workflows: start-to-complete throughput and latency', rows);
process.exit(0);
