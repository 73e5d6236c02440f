/**
 * Workflow spans across an adoption (issue #40), against a real Jaeger and PostgreSQL: two
 * replicas of one app share a workflow store; an instance started on replica A has its first
 * activity held by A's worker when A stops. Replica B adopts the instance and dispatches the
 * activity again (recovery.ts): that dispatch gets an activity span in the start's trace whose
 * parent is the orchestration span A opened (its id is in the shared history), and B's worker gets
 * that span's context as parentTraceContext.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { postgresTarget } from '../services/postgres.ts';
import { eventually, startFlow, startTracedSidecar, tracingFolder, workflowStatus } from './harness.ts';
import { connectWorker } from './taskhub-worker.ts';
import { hex } from './ids.ts';

const why = jaegerUnavailable();
const jaegerReady = requireService('Jaeger', !why, why ?? '');
const pgTarget = await postgresTarget();
const pgReady = requireService('PostgreSQL', pgTarget.available, `nothing answers at ${pgTarget.host}:${pgTarget.port} (set RT_TEST_POSTGRES_URL)`);
const APP = `wfadopt-${process.pid}-${Date.now().toString(36)}`;
const TABLE = `wf_adopt_${process.pid}_${Date.now()}`;

describe.skipIf(!jaegerReady || !pgReady)('workflow spans after an adoption by another replica, exported to Jaeger', () => {
  let jaeger: Jaeger | undefined;
  let folder: Awaited<ReturnType<typeof tracingFolder>> | undefined;
  const sidecars: Sidecar[] = [];
  const workers: { stop(): void }[] = [];

  beforeAll(async () => {
    jaeger = await startJaeger();
    const store = {
      apiVersion: 'rt.io/v1alpha1',
      kind: 'Component',
      metadata: { name: 'wfstore' },
      spec: {
        type: 'state.postgresql',
        version: 'v1',
        metadata: [
          { name: 'connectionString', value: pgTarget.url },
          { name: 'tableName', value: TABLE },
          { name: 'actorStateStore', value: 'true' },
        ],
      },
    };
    folder = await tracingFolder('rtwfa-', jaeger, [store]);
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) w.stop();
    for (const s of sidecars) await s.close();
    await jaeger?.stop();
    await folder?.remove();
    if (pgReady) {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: pgTarget.url });
      await client.connect();
      await client.query(`DROP TABLE IF EXISTS ${TABLE}`);
      await client.end();
    }
  });

  it("an activity the live replica dispatches again is a child of the orchestration span the stopped one opened, and its worker gets that context", async () => {
    const traceId = hex(16);
    const id = `adopt-${hex(4)}`;
    const a = await startTracedSidecar(folder!.dir, APP, undefined, { dataDir: join(folder!.dir, 'a') });
    sidecars.push(a);
    const b = await startTracedSidecar(folder!.dir, APP, undefined, { dataDir: join(folder!.dir, 'b') });
    sidecars.push(b);
    const wa = connectWorker(a, () => false); // holds every activity
    workers.push(wa);
    const res = await startFlow(a, id, `00-${traceId}-${hex(8)}-01`);
    expect(res.status).toBe(202);
    const held = await eventually(() => wa.seen.find((x) => x.orchestrationInstance.instanceId === id), "the first activity on replica A's worker");
    const onA = parseTraceParent(held.parentTraceContext?.traceParent);
    expect(onA?.traceId).toBe(traceId);

    const wb = connectWorker(b, () => true);
    workers.push(wb);
    // a replica that stops says so at once: B adopts its instances without waiting for its lease
    wa.stop();
    await a.close();
    const again = await eventually(() => wb.seen.find((x) => x.orchestrationInstance.instanceId === id && x.name === 'first'), "the first activity on replica B's worker", 30_000);
    const onB = parseTraceParent(again.parentTraceContext?.traceParent);
    expect(onB?.traceId).toBe(traceId);
    expect(again.parentTraceContext?.spanID).toBe(onB?.spanId);
    expect(onB?.spanId).not.toBe(onA?.spanId);
    expect(await workflowStatus(b, id, 'COMPLETED', 30_000)).toBe('COMPLETED');
    await b.close(); // exports what it holds

    // API, create_orchestration, orchestration (A), first (A, ended at its close), first (B), second (B)
    const spans = await jaeger!.waitForTrace(traceId, 6, 30_000);
    const orchestration = spans.find((s) => s.operationName === 'orchestration flow');
    expect(orchestration).toMatchObject({ kind: 'server', tags: expect.objectContaining({ 'rt.workflow.instance_id': id }) });
    const adopted = spans.find((s) => s.spanId === onB!.spanId);
    expect(adopted).toMatchObject({ kind: 'client', operationName: 'activity first', parentSpanId: orchestration!.spanId, tags: expect.objectContaining({ 'rt.workflow.task_id': 0, 'rt.workflow.instance_id': id }) });
    const second = spans.find((s) => s.operationName === 'activity second');
    expect(second?.parentSpanId).toBe(orchestration!.spanId);
  }, 120_000);
});
