/**
 * Placement benchmark (issue 42): how long a table update takes with 100 hosts, all simulated in
 * this process — a placement service on loopback gRPC and 100 placement clients (what each
 * sidecar runs, sidecar/src/actors/placement/remote.ts), each with its own channel and stream.
 *
 * - join: host 101 connects; from its first report until every host routes by the new table
 *   (the full lock → update → unlock round, each phase acknowledged by all 101);
 * - leave: one host closes its stream; until the other 100 route by the table without it;
 * - lookups/s: an actor's owner from one client's table (hash + binary search on the type's ring
 *   of 100 × 100 virtual nodes), against a bare `Map.get` of the same ids (the anchor).
 *
 * Run: node bench/placement.bench.ts (env BENCH_HOSTS, BENCH_ROUNDS change the load).
 */
import { loadavg } from 'node:os';
import pino from 'pino';
import { machineLine, median, percentile, printTable, ratio } from './lib.ts';
import { startPlacementServer } from '../placement/src/grpc/server.ts';
import { PlacementService } from '../placement/src/service.ts';
import { createRemotePlacement, type RemotePlacement } from '../sidecar/src/actors/placement/remote.ts';

const HOSTS = Number(process.env.BENCH_HOSTS ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const log = pino({ level: 'silent' });

console.log(machineLine(), `load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
const service = new PlacementService({ log, heartbeatTimeoutMs: 30_000, ackTimeoutMs: 10_000 });
service.activate();
const server = await startPlacementServer(service, { host: '127.0.0.1', port: 0, log });
let port = 20_000;
const client = () => {
  return createRemotePlacement({ addresses: [server.address], appId: `app-${port}`, namespace: 'default', hostAddress: `10.0.0.1:${port++}`, hostedTypes: ['cat'], log, heartbeatMs: 1000 });
};
const settled = (cs: RemotePlacement[]) => cs.every((c) => !c.locked && c.version !== '' && c.version === cs[0]!.version);
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setImmediate(r));
}

const hosts = Array.from({ length: HOSTS }, client);
await until(() => settled(hosts) && service.snapshot().hosts === HOSTS);

const joins: number[] = [];
const leaves: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  const before = hosts[0]!.version;
  let t = performance.now();
  const extra = client();
  const all = [...hosts, extra];
  await until(() => settled(all) && all[0]!.version !== before && service.snapshot().hosts === HOSTS + 1);
  joins.push(performance.now() - t);
  const mid = hosts[0]!.version;
  t = performance.now();
  await extra.close();
  await until(() => settled(hosts) && hosts[0]!.version !== mid && service.snapshot().hosts === HOSTS);
  leaves.push(performance.now() - t);
}

// lookups: one client's table, 1M calls over 100,000 ids
const ids = Array.from({ length: 100_000 }, (_, i) => `actor-${i}`);
const one = hosts[0]!;
const map = new Map(ids.map((id) => [id, one.lookup('cat', id)!]));
const time = (f: (id: string) => unknown) => {
  let sink = 0;
  for (let i = 0; i < 200_000; i++) sink ^= f(ids[i % ids.length]!) ? 1 : 0; // warm
  const t = performance.now();
  const n = 1_000_000;
  for (let i = 0; i < n; i++) sink ^= f(ids[i % ids.length]!) ? 1 : 0;
  return { perSec: n / ((performance.now() - t) / 1000), sink };
};
const ring = time((id) => one.lookup('cat', id));
const bare = time((id) => map.get(id));

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
printTable(`placement: table update with ${HOSTS} hosts in one process (${ROUNDS} joins, ${ROUNDS} leaves)`, [
  { change: `join of host ${HOSTS + 1}`, 'p50 ms': median(joins), 'p99 ms': percentile(sorted(joins), 99), 'max ms': Math.max(...joins) },
  { change: 'leave of one host', 'p50 ms': median(leaves), 'p99 ms': percentile(sorted(leaves), 99), 'max ms': Math.max(...leaves) },
]);
printTable('placement: lookups on one host', [
  { lookup: `ring (${HOSTS} hosts × 100 virtual nodes)`, 'lookups/s': Math.round(ring.perSec), 'vs anchor': ratio(ring.perSec, bare.perSec) },
  { lookup: 'anchor: bare Map.get', 'lookups/s': Math.round(bare.perSec), 'vs anchor': '1.00×' },
]);

await Promise.all(hosts.map((h) => h.close()));
service.deactivate('done');
await server.close();
process.exit(0);
