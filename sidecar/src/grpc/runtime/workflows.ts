/**
 * Workflow management methods (Beta1 names, Alpha1 aliases) on the workflow block's engine —
 * the same one the HTTP API and TaskHubSidecarService drive. Instance id rules are the block's
 * (workflows/ids.ts); the answer of GetWorkflow carries the HTTP API's properties.
 * Errors are the HTTP API's, from the rows of the one error table (api/errors.ts, through
 * workflows/routes.ts's workflowApiError): the same errorCode, the row's gRPC code.
 */
import * as grpc from '@grpc/grpc-js';
import type { SidecarContext } from '../../context.ts';
import type { Engine } from '../../workflows/engine.ts';
import { ERRORS, fail } from '../../api/errors.ts';
import type { WorkflowOperation } from '../../workflows/errors.ts';
import { checkInstanceId } from '../../workflows/ids.ts';
import { toTimestamp } from '../../workflows/proto.ts';
import { toHttpInstance, workflowApiError } from '../../workflows/routes.ts';
import { GrpcError } from './errors.ts';
import { bytesOf } from './handler.ts';
import { metadataContext } from '../../tracing/carried.ts';

const COMPONENTS = new Set(['', 'rt', 'dapr']);

interface InstanceReq {
  instance_id: string;
  workflow_component: string;
}

/** Errors of `op` as HTTP answers them (an ApiError on its row; GrpcErrors pass). */
async function run<T>(op: WorkflowOperation, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof GrpcError ? e : workflowApiError(e, op);
  }
}

function component(name: string): void {
  if (!COMPONENTS.has(name ?? '')) {
    throw fail(ERRORS.WORKFLOW_COMPONENT_NOT_FOUND, `workflow component "${String(name).slice(0, 80)}" does not exist: use "rt" (or its alias "dapr")`);
  }
}

/** Payload bytes as the text the engine keeps; none when empty. */
function text(b: Buffer | null | undefined): string | undefined {
  const buf = bytesOf(b);
  return buf.length ? buf.toString('utf8') : undefined;
}

export function workflowMethods(ctx: SidecarContext) {
  const engine = (): Engine => {
    const e = ctx.services.workflows;
    if (!e) throw new GrpcError(grpc.status.UNAVAILABLE, 'ERR_WORKFLOW_ENGINE', 'the workflow engine is not running in this sidecar');
    return e;
  };
  const lookup = (req: InstanceReq): string => {
    component(req.workflow_component);
    checkInstanceId(req.instance_id ?? '', 'lookup');
    return req.instance_id;
  };
  const op = (name: WorkflowOperation, fn: (e: Engine, id: string) => Promise<unknown>) => async (req: InstanceReq) => {
    await run(name, async () => fn(engine(), lookup(req)));
    return {};
  };

  const methods = {
    StartWorkflowBeta1: async (req: InstanceReq & { workflow_name: string; input: Buffer }, call?: { metadata: grpc.Metadata }) =>
      run('START', async () => {
        component(req.workflow_component);
        if (!req.workflow_name) throw fail(ERRORS.WORKFLOW_NAME_MISSING, 'workflow_name is required');
        const instanceId = req.instance_id || undefined;
        if (instanceId) checkInstanceId(instanceId, 'start');
        const trace = call && metadataContext(call.metadata);
        const id = await engine().start({ instanceId, name: req.workflow_name, input: text(req.input), trace });
        return { instance_id: id };
      }),

    GetWorkflowBeta1: async (req: InstanceReq) =>
      run('GET', async () => {
        const id = lookup(req);
        const rec = await engine().get(id);
        if (!rec) throw fail(ERRORS.WORKFLOW_INSTANCE_NOT_FOUND, `no workflow instance with id "${id}"`);
        const view = toHttpInstance(rec);
        return {
          instance_id: rec.id,
          workflow_name: rec.name,
          created_at: toTimestamp(rec.createdAt),
          last_updated_at: toTimestamp(rec.updatedAt),
          runtime_status: rec.status,
          properties: view.properties as Record<string, string>,
        };
      }),

    TerminateWorkflowBeta1: op('TERMINATE', (e, id) => e.terminate(id, undefined)),
    PauseWorkflowBeta1: op('PAUSE', (e, id) => e.suspend(id)),
    ResumeWorkflowBeta1: op('RESUME', (e, id) => e.resume(id)),
    PurgeWorkflowBeta1: op('PURGE', (e, id) => e.purge(id)),

    RaiseEventWorkflowBeta1: async (req: InstanceReq & { event_name: string; event_data: Buffer }) => {
      await run('RAISE_EVENT', async () => {
        const id = lookup(req);
        if (!req.event_name) throw fail(ERRORS.WORKFLOW_EVENT_NAME_MISSING, 'event_name is required');
        await engine().raiseEvent(id, req.event_name, text(req.event_data));
      });
      return {};
    },
  };
  return {
    ...methods,
    StartWorkflowAlpha1: methods.StartWorkflowBeta1,
    GetWorkflowAlpha1: methods.GetWorkflowBeta1,
    TerminateWorkflowAlpha1: methods.TerminateWorkflowBeta1,
    PauseWorkflowAlpha1: methods.PauseWorkflowBeta1,
    ResumeWorkflowAlpha1: methods.ResumeWorkflowBeta1,
    PurgeWorkflowAlpha1: methods.PurgeWorkflowBeta1,
    RaiseEventWorkflowAlpha1: methods.RaiseEventWorkflowBeta1,
  };
}
