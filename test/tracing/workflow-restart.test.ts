/**
 * Workflow spans across a restart (issue #40), against a real Jaeger: a workflow's first activity
 * completes, the sidecar closes while the second is dispatched and unanswered, and a new sidecar
 * on the same data dir dispatches it again (recovery). That dispatch gets an activity span in the
 * start's trace whose parent is the orchestration span the first sidecar opened (its ids are in
 * the history), and the worker gets that span's context as parentTraceContext. A rerun is a start
 * of its own: its spans are in the rerun call's trace (or a new one) and link to the source's
 * orchestration span.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../sidecar/src/sidecar.ts';
import { parseTraceParent } from '../../sidecar/src/tracing/context.ts';
import { requireService } from '../services/ci.ts';
import { jaegerUnavailable, startJaeger, type Jaeger } from '../services/jaeger.ts';
import { eventually, startFlow, startTracedSidecar, tracingFolder, workflowStatus } from './harness.ts';
import { connectWorker } from './taskhub-worker.ts';
import type { ActivityRequest } from '../../sidecar/src/workflows/proto.ts';
import { hex, isError } from './ids.ts';

const why = jaegerUnavailable();
const available = requireService('Jaeger', !why, why ?? '');
const APP = `wfrestart-${process.pid}-${Date.now().toString(36)}`;

describe.skipIf(!available)('workflow spans after a restart, exported to Jaeger', () => {
  let jaeger: Jaeger | undefined;
  let folder: Awaited<ReturnType<typeof tracingFolder>> | undefined;
  const sidecars: Sidecar[] = [];
  const workers: { stop(): void }[] = [];

  /** A traced sidecar on the suite's data dir and a worker on it answering what `answer` accepts; both closed at the end. */
  async function sidecarWithWorker(answer: (a: ActivityRequest) => boolean): Promise<{ sidecar: Sidecar; w: ReturnType<typeof connectWorker> }> {
    const sidecar = await startTracedSidecar(folder!.dir, APP);
    sidecars.push(sidecar);
    const w = connectWorker(sidecar, answer);
    workers.push(w);
    return { sidecar, w };
  }

  beforeAll(async () => {
    jaeger = await startJaeger();
    folder = await tracingFolder('rtwfr-', jaeger, []);
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) w.stop();
    for (const s of sidecars) await s.close();
    await jaeger?.stop();
    await folder?.remove();
  });

  it("an activity dispatched again by a new sidecar on the same data dir is a child of the orchestration span, and the worker gets its context", async () => {
    const traceId = hex(16);
    const root = hex(8);
    const id = `wf-${hex(4)}`;
    // the first sidecar's worker answers `first` and holds `second`
    const { sidecar: first, w: w1 } = await sidecarWithWorker((a) => a.name === 'first');
    const res = await startFlow(first, id, `00-${traceId}-${root}-01`);
    expect(res.status).toBe(202);
    const held = await eventually(() => w1.seen.find((a) => a.name === 'second'), 'the second activity before the restart');
    const before = parseTraceParent(held.parentTraceContext?.traceParent);
    expect(before?.traceId).toBe(traceId);
    w1.stop();
    await first.close();

    const { sidecar: second, w: w2 } = await sidecarWithWorker(() => true);
    const again = await eventually(() => w2.seen.find((a) => a.name === 'second'), 'the second activity after the restart');
    expect(again.orchestrationInstance.instanceId).toBe(id);
    const given = parseTraceParent(again.parentTraceContext?.traceParent);
    expect(given?.traceId).toBe(traceId);
    expect(again.parentTraceContext?.spanID).toBe(given?.spanId);
    // a new span, not the one the first sidecar ended at its close
    expect(given?.spanId).not.toBe(before?.spanId);
    expect(await workflowStatus(second, id, 'COMPLETED')).toBe('COMPLETED');

    // a rerun from the second activity's TaskScheduled (event 1) is a start of its own, in the
    // rerun call's trace: the activity it schedules again is under the rerun's orchestration span
    const rerunId = `${id}-rerun`;
    const rerunTrace = hex(16);
    await w2.rerun(id, 1, rerunId, `00-${rerunTrace}-${hex(8)}-01`);
    const rerun = await eventually(() => w2.seen.find((a) => a.orchestrationInstance.instanceId === rerunId), 'the rerun activity');
    const rerunGiven = parseTraceParent(rerun.parentTraceContext?.traceParent);
    expect(rerunGiven?.traceId).toBe(rerunTrace);
    await second.close();

    // API, create_orchestration, orchestration, first, second (held), second (again)
    const spans = await jaeger!.waitForTrace(traceId, 6, 30_000);
    const orchestration = spans.find((s) => s.operationName === 'orchestration flow');
    expect(orchestration).toMatchObject({ kind: 'server', tags: expect.objectContaining({ 'rt.workflow.instance_id': id }) });
    const act = spans.find((s) => s.spanId === given!.spanId);
    expect(act).toMatchObject({ kind: 'client', operationName: 'activity second', parentSpanId: orchestration!.spanId, tags: expect.objectContaining({ 'rt.workflow.task_id': 1, 'rt.workflow.instance_id': id }) });
    // it ended with the result, not at the second sidecar's close; the held one ended at the first's close
    expect(isError(act)).toBe(false);
    expect(isError(spans.find((s) => s.spanId === before!.spanId))).toBe(true);
    expect(spans.some((s) => s.tags['rt.workflow.instance_id'] === rerunId)).toBe(false);
    // create_orchestration (the rerun), its orchestration span, second (rerun)
    const rerunSpans = await jaeger!.waitForTrace(rerunTrace, 3, 30_000);
    const rerunOrchestration = rerunSpans.find((s) => s.operationName === 'orchestration flow');
    expect(rerunOrchestration).toMatchObject({ kind: 'server', tags: expect.objectContaining({ 'rt.workflow.instance_id': rerunId }), links: [`${traceId}-${orchestration!.spanId}`] });
    const create = rerunSpans.find((s) => s.spanId === rerunOrchestration!.parentSpanId);
    expect(create).toMatchObject({ kind: 'producer', operationName: 'create_orchestration flow', tags: expect.objectContaining({ 'rt.operation': 'workflow.rerun' }), links: [`${traceId}-${orchestration!.spanId}`] });
    expect(rerunSpans.find((s) => s.spanId === rerunGiven!.spanId)).toMatchObject({ kind: 'client', operationName: 'activity second', parentSpanId: rerunOrchestration!.spanId, tags: expect.objectContaining({ 'rt.workflow.instance_id': rerunId }) });
  }, 120_000);

  it("a rerun dispatches an activity that was still pending at its cut under the rerun's orchestration span too", async () => {
    const traceId = hex(16);
    const id = `par-${hex(4)}`;
    const { sidecar, w } = await sidecarWithWorker(() => true);
    const res = await startFlow(sidecar, id, `00-${traceId}-${hex(8)}-01`);
    expect(res.status).toBe(202);
    expect(await workflowStatus(sidecar, id, 'COMPLETED')).toBe('COMPLETED');
    // cut before `second` (task 1): `first`, scheduled before it and answered after, is pending again
    const rerunId = `${id}-rerun`;
    await w.rerun(id, 1, rerunId);
    const pending = await eventually(() => w.seen.find((a) => a.orchestrationInstance.instanceId === rerunId && a.name === 'first'), "the rerun's pending activity");
    const given = parseTraceParent(pending.parentTraceContext?.traceParent);
    // the rerun call brought no context: a trace of its own
    expect(given?.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(given?.traceId).not.toBe(traceId);
    const own = await eventually(() => w.seen.find((a) => a.orchestrationInstance.instanceId === rerunId && a.name === 'second'), "the rerun's own activity");
    expect(parseTraceParent(own.parentTraceContext?.traceParent)?.traceId).toBe(given?.traceId);
    // create_orchestration, orchestration, first (pending at the cut), second
    const spans = await jaeger!.waitForTrace(given!.traceId, 4, 30_000);
    const orchestration = spans.find((s) => s.operationName === 'orchestration flow');
    expect(orchestration?.tags['rt.workflow.instance_id']).toBe(rerunId);
    const source = (await jaeger!.waitForTrace(traceId, 5, 30_000)).find((s) => s.operationName === 'orchestration flow');
    expect(orchestration?.links).toEqual([`${traceId}-${source!.spanId}`]);
    expect(spans.find((s) => s.spanId === given!.spanId)).toMatchObject({ kind: 'client', operationName: 'activity first', parentSpanId: orchestration!.spanId, tags: expect.objectContaining({ 'rt.workflow.instance_id': rerunId, 'rt.workflow.task_id': 0 }) });
  }, 120_000);

  it("a start refused because the id runs already leaves the running instance's orchestration span as it was", async () => {
    const traceId = hex(16);
    const id = `dup-${hex(4)}`;
    const { sidecar, w } = await sidecarWithWorker(() => false);
    const base = `http://127.0.0.1:${sidecar.httpPort}/v1.0/workflows/dapr`;
    expect((await startFlow(sidecar, id, `00-${traceId}-${hex(8)}-01`)).status).toBe(202);
    await eventually(() => w.seen.find((a) => a.orchestrationInstance.instanceId === id), 'the first activity');
    const again = await startFlow(sidecar, id, `00-${hex(16)}-${hex(8)}-01`);
    expect(again.status).not.toBe(202);
    expect((await fetch(`${base}/${id}/terminate`, { method: 'POST' })).status).toBe(202);
    expect(await workflowStatus(sidecar, id, 'TERMINATED')).toBe('TERMINATED');
    await sidecar.close(); // exports what it holds
    const spans = await jaeger!.waitForTrace(traceId, 4, 30_000);
    const orchestration = spans.find((s) => s.operationName === 'orchestration flow');
    // ended by the instance's end, not by the refused start
    expect(orchestration?.tags['rt.workflow.status']).toBe('TERMINATED');
    expect(isError(orchestration)).toBe(false);
    // the activity it was waiting for ended with it
    const activity = spans.find((s) => s.operationName === 'activity first');
    expect(activity?.parentSpanId).toBe(orchestration?.spanId);
    expect(isError(activity)).toBe(true);
  }, 120_000);
});
