/**
 * Two sidecar replicas of one app sharing a PostgreSQL actor state store, each with its own
 * durabletask-js worker. Workflows start on either replica and get their event through the
 * other one, so instances move between replicas; all 200 must complete, each exactly once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient, TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { postgresTarget } from '../../test/services/postgres.ts';
import { fileURLToPath } from 'node:url';
import { freePort, waitForPort } from '../../test/services/net.ts';
import { killed, lines, quietSdkLogs, sidecarForTest, startWorker, waitUntil, type TestSidecar } from './harness.ts';

const target = await postgresTarget();
const available = requireService('PostgreSQL', target.available, `nothing answers at ${target.host}:${target.port} (set RT_TEST_POSTGRES_URL)`);
const table = `wf_replicas_${process.pid}_${Date.now()}`;
const CLI = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));

const N = 200;
const recorded = new Map<string, number>();
const incs = new Map<string, number>();
let resources: string;
let replicas: TestSidecar[] = [];
let workers: TaskHubGrpcWorker[] = [];
let clients: TaskHubGrpcClient[] = [];
let restore: () => void;
const procs: ChildProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  if (!available) return;
  restore = quietSdkLogs();
  resources = mkdtempSync(join(tmpdir(), 'rt-wf-pg-'));
  dirs.push(resources);
  writeFileSync(
    join(resources, 'store.yaml'),
    `apiVersion: rt.io/v1alpha1
kind: Component
metadata:
  name: wfstore
spec:
  type: state.postgresql
  version: v1
  metadata:
  - name: connectionString
    value: "${target.url}"
  - name: tableName
    value: ${table}
  - name: actorStateStore
    value: "true"
`,
  );
  replicas = [await sidecarForTest('wf-pg', { resourcesPaths: [resources] }), await sidecarForTest('wf-pg', { resourcesPaths: [resources] })];
  for (const r of replicas) {
    const w = new TaskHubGrpcWorker(r.grpcAddress);
    w.addNamedActivity('inc', async (_: unknown, x: { id: string; n: number }) => {
      incs.set(x.id, (incs.get(x.id) ?? 0) + 1);
      return x.n + 1;
    });
    w.addNamedActivity('record', async (_: unknown, id: string) => {
      recorded.set(id, (recorded.get(id) ?? 0) + 1);
      return id;
    });
    w.addNamedOrchestrator('pg', async function* (ctx: any, n: number): any {
      const a: number = yield ctx.callActivity('inc', { id: ctx.instanceId, n });
      const ev: number = yield ctx.waitForExternalEvent('go');
      yield ctx.callActivity('record', ctx.instanceId);
      return a + ev;
    });
    await w.start();
    workers.push(w);
    clients.push(new TaskHubGrpcClient(r.grpcAddress));
  }
});

afterAll(async () => {
  for (const w of workers) await w.stop().catch(() => undefined);
  for (const c of clients) await c.stop().catch(() => undefined);
  for (const r of replicas) await r.stop();
  workers = [];
  clients = [];
  replicas = [];
  for (const p of procs) await killed(p);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (available) {
    const c = new pg.Client({ connectionString: target.url });
    await c.connect();
    await c.query(`DROP TABLE IF EXISTS "${table}"`).catch(() => undefined);
    await c.end();
  }
  restore?.();
});

describe.skipIf(!available)('two sidecar replicas on PostgreSQL', () => {
  it(`completes ${N} workflows, each exactly once, with events raised through the other replica`, async () => {
    const ids = Array.from({ length: N }, (_, i) => `pg-${i}`);
    await Promise.all(ids.map((id, i) => clients[i % 2].scheduleNewOrchestration('pg', i, id)));
    // each instance gets its event through the replica it did not start on
    await Promise.all(
      ids.map(async (id, i) => {
        await clients[(i + 1) % 2].waitForOrchestrationStart(id, false, 60);
        await clients[(i + 1) % 2].raiseOrchestrationEvent(id, 'go', 1000);
      }),
    );
    const states = await Promise.all(ids.map((id, i) => clients[i % 2].waitForOrchestrationCompletion(id, true, 90)));
    states.forEach((st, i) => {
      expect(st?.runtimeStatus, ids[i]).toBe(OrchestrationStatus.COMPLETED);
      expect(JSON.parse(st?.serializedOutput ?? ''), ids[i]).toBe(i + 1 + 1000);
    });
    for (const id of ids) {
      expect(recorded.get(id), `record ran for ${id}`).toBe(1);
      expect(incs.get(id), `inc ran for ${id}`).toBe(1);
    }
    // both replicas did work
    const md = await Promise.all(replicas.map(async (r) => (await (await fetch(`${r.base}/v1.0/metadata`)).json()) as { actors: { type: string }[] }));
    for (const m of md) expect(m.actors.map((a) => a.type)).toContain('rt.internal.default.wf-pg.workflow');
  }, 120_000);
});

describe.skipIf(!available)('a replica that dies (kill -9) on PostgreSQL', () => {
  it('has its instances adopted by the live replica: stuck activities and timers finish there', async () => {
    const markers = mkdtempSync(join(tmpdir(), 'rt-wf-pg-markers-'));
    const deadDir = mkdtempSync(join(tmpdir(), 'rt-wf-pg-dead-'));
    dirs.push(markers, deadDir);
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const a = spawn(
      process.execPath,
      [CLI, 'sidecar', '--app-id', 'wf-pg-dead', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', deadDir, '--resources-path', resources, '--log-level', 'error'],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    procs.push(a);
    await waitForPort('127.0.0.1', httpPort, 30_000);
    const workerA = startWorker(`127.0.0.1:${grpcPort}`, markers, { SLOW_MS: '600000' });
    procs.push(workerA);
    const b = await sidecarForTest('wf-pg-dead', { resourcesPaths: [resources] });
    replicas.push(b);
    const clientA = new TaskHubGrpcClient(`127.0.0.1:${grpcPort}`);
    const clientB = new TaskHubGrpcClient(b.grpcAddress);
    clients.push(clientA, clientB);
    const ids = ['dead-0', 'dead-1', 'dead-2'];
    for (const id of ids) await clientA.scheduleNewOrchestration('resilient', 1, id);
    // every instance has its two slow activities stuck in replica A's worker
    await waitUntil(() => lines(markers, 'slow').length >= 2 * ids.length, 30_000, 'slow activities on replica A');
    await killed(a);
    await killed(workerA);
    const workerB = startWorker(b.grpcAddress, markers, { SLOW_MS: '50' });
    procs.push(workerB);
    const states = await Promise.all(ids.map((id) => clientB.waitForOrchestrationCompletion(id, true, 60)));
    for (const st of states) {
      expect(st?.runtimeStatus).toBe(OrchestrationStatus.COMPLETED);
      expect(JSON.parse(st?.serializedOutput ?? '')).toBe(51);
    }
  }, 90_000);
});
