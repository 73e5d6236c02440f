/**
 * Two sidecar replicas of one app sharing a PostgreSQL actor state store, each with its own
 * durabletask-js worker. Workflows start on either replica and get their event through the
 * other one, so instances move between replicas; all 200 must complete, each exactly once.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient, TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../../test/services/ci.ts';
import { postgresTarget } from '../../test/services/postgres.ts';
import { quietSdkLogs, sidecarForTest, type TestSidecar } from './harness.ts';

const target = await postgresTarget();
const available = requireService('PostgreSQL', target.available, `nothing answers at ${target.host}:${target.port} (set RT_TEST_POSTGRES_URL)`);
const table = `wf_replicas_${process.pid}_${Date.now()}`;

const N = 200;
const recorded = new Map<string, number>();
const incs = new Map<string, number>();
let resources: string;
let replicas: TestSidecar[] = [];
let workers: TaskHubGrpcWorker[] = [];
let clients: TaskHubGrpcClient[] = [];
let restore: () => void;

beforeAll(async () => {
  if (!available) return;
  restore = quietSdkLogs();
  resources = mkdtempSync(join(tmpdir(), 'rt-wf-pg-'));
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
  if (resources) rmSync(resources, { recursive: true, force: true });
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
