/**
 * Workflow management over the gRPC runtime API (Beta1 and Alpha1 names), with a real
 * @dapr/durabletask-js worker connected to the same sidecar running the orchestrations.
 * The @dapr/dapr DaprClient has no gRPC workflow client (it throws GRPCNotSupportedError) and
 * DaprWorkflowClient talks TaskHubSidecarService, so the calls are raw grpc-js with our protos.
 */
import * as grpc from '@grpc/grpc-js';
import { TaskHubGrpcWorker } from '@dapr/durabletask-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntimeSidecar, type RuntimeSidecar } from './harness.ts';

type Ctx = any;

let s: RuntimeSidecar;
let worker: TaskHubGrpcWorker;
const saved = { log: console.log, info: console.info, error: console.error, warn: console.warn };

const approval = async function* (ctx: Ctx, input: unknown): any {
  const ev = yield ctx.waitForExternalEvent('approve');
  return { input, ev };
};
const forever = async function* (ctx: Ctx): any {
  yield ctx.waitForExternalEvent('never');
  return 'unreachable';
};

beforeAll(async () => {
  // the SDK worker logs every step on the console
  console.log = console.info = () => undefined;
  if (!process.env.RT_TEST_LOG) console.error = console.warn = () => undefined;
  s = await startRuntimeSidecar();
  worker = new TaskHubGrpcWorker(`127.0.0.1:${s.sidecar.grpcPort}`);
  worker.addNamedOrchestrator('approval', approval);
  worker.addNamedOrchestrator('forever', forever);
  await worker.start();
});
afterAll(async () => {
  await worker?.stop().catch(() => undefined);
  await s?.stop();
  Object.assign(console, saved);
});

interface Wf {
  instance_id: string;
  workflow_name: string;
  runtime_status: string;
  created_at: { seconds: number };
  last_updated_at: { seconds: number };
  properties: Record<string, string>;
}

const get = (id: string, method = 'GetWorkflowBeta1') => s.call<Wf>(method, { instance_id: id, workflow_component: 'rt' });

async function waitStatus(id: string, status: string): Promise<Wf> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const wf = await get(id);
    if (wf.runtime_status === status) return wf;
    if (Date.now() > deadline) throw new Error(`${id} is ${wf.runtime_status}, not ${status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('workflows over the gRPC API', () => {
  it('starts, raises an event, completes and purges', async () => {
    const started = await s.call<{ instance_id: string }>('StartWorkflowBeta1', { instance_id: 'wf-1', workflow_component: 'rt', workflow_name: 'approval', input: Buffer.from('"order-7"') });
    expect(started.instance_id).toBe('wf-1');
    const running = await waitStatus('wf-1', 'RUNNING');
    expect(running.workflow_name).toBe('approval');
    expect(running.created_at.seconds).toBeGreaterThan(1_700_000_000);
    expect(running.properties['rt.workflow.input']).toBe('"order-7"');

    await s.call('RaiseEventWorkflowBeta1', { instance_id: 'wf-1', workflow_component: 'rt', event_name: 'approve', event_data: Buffer.from('{"by":"ana"}') });
    const done = await waitStatus('wf-1', 'COMPLETED');
    expect(JSON.parse(done.properties['rt.workflow.output'])).toEqual({ input: 'order-7', ev: { by: 'ana' } });
    // the HTTP API sees the same instance
    const http = (await (await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/workflows/rt/wf-1`)).json()) as Record<string, unknown>;
    expect(http).toMatchObject({ instanceID: 'wf-1', runtimeStatus: 'COMPLETED', workflowName: 'approval' });

    await s.call('PurgeWorkflowBeta1', { instance_id: 'wf-1', workflow_component: 'rt' });
    const gone = await s.fail('GetWorkflowBeta1', { instance_id: 'wf-1', workflow_component: 'rt' });
    expect(gone.code).toBe(grpc.status.NOT_FOUND);
    expect(gone.metadata.get('rt-error-code')).toEqual(['ERR_INSTANCE_ID_NOT_FOUND']);
  });

  it('pauses, resumes, terminates (Alpha1 names too) and refuses what the state forbids', async () => {
    const { instance_id: id } = await s.call<{ instance_id: string }>('StartWorkflowAlpha1', { workflow_component: 'dapr', workflow_name: 'forever' });
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await waitStatus(id, 'RUNNING');

    const again = await s.fail('StartWorkflowBeta1', { instance_id: id, workflow_component: 'rt', workflow_name: 'forever' });
    expect(again.code).toBe(grpc.status.ALREADY_EXISTS);

    await s.call('PauseWorkflowAlpha1', { instance_id: id, workflow_component: 'rt' });
    await waitStatus(id, 'SUSPENDED');
    await s.call('ResumeWorkflowBeta1', { instance_id: id, workflow_component: 'rt' });
    await waitStatus(id, 'RUNNING');

    const purgeRunning = await s.fail('PurgeWorkflowAlpha1', { instance_id: id, workflow_component: 'rt' });
    expect(purgeRunning.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(purgeRunning.details).toContain('RUNNING');
    // the errorCode HTTP answers for the same purge (and the reference runtime over both)
    expect(purgeRunning.metadata.get('rt-error-code')).toEqual(['ERR_PURGE_WORKFLOW']);
    const httpPurge = await fetch(`http://127.0.0.1:${s.sidecar.httpPort}/v1.0/workflows/rt/${id}/purge`, { method: 'POST' });
    expect(httpPurge.status).toBe(409);
    expect(((await httpPurge.json()) as { errorCode: string }).errorCode).toBe('ERR_PURGE_WORKFLOW');

    await s.call('TerminateWorkflowAlpha1', { instance_id: id, workflow_component: 'rt' });
    expect((await waitStatus(id, 'TERMINATED')).instance_id).toBe(id);
    const pauseDone = await s.fail('PauseWorkflowBeta1', { instance_id: id, workflow_component: 'rt' });
    expect(pauseDone.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(pauseDone.metadata.get('rt-error-code')).toEqual(['ERR_PAUSE_WORKFLOW']);
    expect((await get(id, 'GetWorkflowAlpha1')).runtime_status).toBe('TERMINATED');
  });

  it('bad requests are INVALID_ARGUMENT, unknown instances NOT_FOUND', async () => {
    const bad: [string, unknown][] = [
      ['StartWorkflowBeta1', { workflow_component: 'other', workflow_name: 'forever' }],
      ['StartWorkflowBeta1', { workflow_component: 'rt', workflow_name: '' }],
      ['StartWorkflowBeta1', { instance_id: 'has space', workflow_component: 'rt', workflow_name: 'forever' }],
      ['StartWorkflowBeta1', { instance_id: 'x'.repeat(65), workflow_component: 'rt', workflow_name: 'forever' }],
      ['GetWorkflowBeta1', { instance_id: '', workflow_component: 'rt' }],
      ['TerminateWorkflowBeta1', { instance_id: 'a/b', workflow_component: 'rt' }],
      ['RaiseEventWorkflowBeta1', { instance_id: 'wf-x', workflow_component: 'rt', event_name: '' }],
    ];
    for (const [method, req] of bad) expect({ method, code: (await s.fail(method, req)).code }).toEqual({ method, code: grpc.status.INVALID_ARGUMENT });
    for (const method of ['TerminateWorkflowBeta1', 'PauseWorkflowBeta1', 'ResumeWorkflowBeta1', 'PurgeWorkflowBeta1']) {
      expect({ method, code: (await s.fail(method, { instance_id: 'no-such-instance', workflow_component: 'rt' })).code }).toEqual({ method, code: grpc.status.NOT_FOUND });
    }
    expect((await s.fail('RaiseEventWorkflowBeta1', { instance_id: 'no-such-instance', event_name: 'e' })).code).toBe(grpc.status.NOT_FOUND);
  });
});
