/**
 * State GET/SET through a pluggable state store (examples/pluggable-state, its own process on a
 * Unix socket) against the same kind of store built in (state.in-memory), both behind one
 * `rt sidecar` child process, driven over its HTTP API. Target: pluggable ≥ 50% of built-in.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { load, machineLine, printTable, ratio, startChild, type LoadResult, type Row } from './lib.ts';
import { freePort } from '../test/services/net.ts';

const root = join(import.meta.dirname, '..');
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONCURRENCY = 32;

const dir = mkdtempSync(join(tmpdir(), 'rtbench-pl-'));
const sockets = join(dir, 's');
const resources = join(dir, 'r');
mkdirSync(sockets);
mkdirSync(resources);
writeFileSync(
  join(resources, 'components.yaml'),
  ['builtin:state.in-memory', 'pluggable:state.memstore']
    .map((c) => `apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${c.split(':')[0]}\nspec:\n  type: ${c.split(':')[1]}\n  version: v1\n`)
    .join('---\n'),
);

console.log(machineLine());
// the machine may be shared: say how busy it was, since both sides suffer from it unequally
const loadAvg = () => loadavg().map((l) => l.toFixed(1)).join(' ');
console.log(`load average at start: ${loadAvg()}`);
const component = await startChild(process.execPath, [join(root, 'examples/pluggable-state/main.ts'), '--folder', sockets, '--name', 'memstore']);
for (let i = 0; i < 100 && !existsSync(join(sockets, 'memstore.sock')); i++) await new Promise((r) => setTimeout(r, 100));
const httpPort = await freePort();
const sidecar = await startChild(
  process.execPath,
  [join(root, 'cli/rt.ts'), 'sidecar', '--app-id', 'bench', '--http-port', String(httpPort), '--grpc-port', String(await freePort()), '--resources-path', resources, '--data-dir', join(dir, 'd'), '--log-level', 'warn'],
  { env: { RT_COMPONENTS_SOCKETS_FOLDER: sockets }, readyUrl: `http://127.0.0.1:${httpPort}/v1.0/healthz` },
);

const base = `http://127.0.0.1:${httpPort}/v1.0/state`;
const value = JSON.stringify({ id: 42, name: 'benchmark item', tags: ['a', 'b', 'c'], price: 9.99 });
const set = (store: string) =>
  load({
    url: `${base}/${store}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: (i) => `[{"key":"k${i % 1000}","value":${value}}]`,
    concurrency: CONCURRENCY,
    durationMs: DURATION_MS,
  });
const get = (store: string) => load({ url: `${base}/${store}/k7`, concurrency: CONCURRENCY, durationMs: DURATION_MS });

/** Median of numbers. */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

try {
  // warm both paths (JIT, connections) before measuring
  await set('builtin').then(() => set('pluggable'));
  const rows: Row[] = [];
  for (const [op, run] of [
    ['SET', set],
    ['GET', get],
  ] as const) {
    // the machine is shared: alternate the two sides over several rounds and report medians,
    // so that a burst of other load does not land on one side only
    const b: LoadResult[] = [];
    const p: LoadResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        b.push(await run('builtin'));
        p.push(await run('pluggable'));
      } else {
        p.push(await run('pluggable'));
        b.push(await run('builtin'));
      }
    }
    rows.push({
      op,
      'built-in req/s': median(b.map((r) => r.rps)),
      'pluggable req/s': median(p.map((r) => r.rps)),
      'pluggable / built-in': ratio(median(p.map((r, i) => r.rps / b[i].rps)), 1),
      'built-in p99 ms': median(b.map((r) => r.p99Ms)),
      'pluggable p99 ms': median(p.map((r) => r.p99Ms)),
      errors: [...b, ...p].reduce((n, r) => n + r.errors, 0),
    });
  }
  printTable(
    `state through a pluggable store vs state.in-memory (HTTP, ${CONCURRENCY} concurrent, median of ${ROUNDS} alternating rounds of ${DURATION_MS / 1000} s; target ≥ 0.50×)`,
    rows,
  );
  console.log(`\nload average at end: ${loadAvg()}`);
} finally {
  await sidecar.stop();
  await component.stop();
  rmSync(dir, { recursive: true, force: true });
}
