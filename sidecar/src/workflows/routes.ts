/**
 * The HTTP workflow API: a front to the same engine the gRPC service drives. Routes answer
 * under /v1.0, /v1.0-beta1 and /v1.0-alpha1; the component name is `rt` (alias `dapr`).
 * Start input and raised event data are taken raw, as the body's text.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, fail, failAs } from '../api/errors.ts';
import { ApiError } from '../http/errors.ts';
import { rawBodyRoutes } from '../http/server.ts';
import type { Engine } from './engine.ts';
import { WorkflowError, errorCodeOf, type WorkflowOperation } from './errors.ts';
import { checkInstanceId } from './ids.ts';
import type { InstanceState } from './record.ts';
import * as schemas from './schemas.ts';
import type { RouteSchema } from '../http/schema.ts';

export const API_VERSIONS = ['v1.0', 'v1.0-beta1', 'v1.0-alpha1'];
const COMPONENTS = new Set(['rt', 'dapr']);

type Params = Record<string, string>;

/** The engine's error kinds on the rows of the one error table (api/errors.ts). */
const ROWS = { INVALID: ERRORS.WORKFLOW_INSTANCE_INVALID, CONFLICT: ERRORS.WORKFLOW_EXISTS, PRECONDITION: ERRORS.WORKFLOW_STATE_REFUSES } as const;

/** An error of `op` as both transports answer it: engine errors on their rows, anything unknown ERR_<op>_WORKFLOW. */
export function workflowApiError(e: unknown, op: WorkflowOperation): unknown {
  if (e instanceof WorkflowError) return e.code === 'NOT_FOUND' ? fail(ERRORS.WORKFLOW_INSTANCE_NOT_FOUND, e.message) : failAs(ROWS[e.code], errorCodeOf(e, op), e.message);
  if (e instanceof ApiError) return e;
  return failAs(ERRORS.WORKFLOW_FAILED, `ERR_${op}_WORKFLOW`, (e as Error)?.message ?? String(e));
}

function component(p: Params): void {
  if (!COMPONENTS.has(p.workflowComponent)) {
    throw fail(ERRORS.WORKFLOW_COMPONENT_NOT_FOUND, `workflow component "${p.workflowComponent}" does not exist: use "rt" (or its alias "dapr")`);
  }
}

function lookupId(p: Params): string {
  try {
    checkInstanceId(p.instanceID, 'lookup');
  } catch (e) {
    throw workflowApiError(e, 'GET');
  }
  return p.instanceID;
}

function bodyText(req: FastifyRequest): string | undefined {
  const b = req.body;
  if (b === undefined || b === null) return undefined;
  if (Buffer.isBuffer(b)) return b.length ? b.toString('utf8') : undefined;
  if (typeof b === 'string') return b.length ? b : undefined;
  return JSON.stringify(b);
}

export function toHttpInstance(rec: InstanceState): Record<string, unknown> {
  const props: Record<string, string> = {};
  const put = (k: string, v: string | undefined) => {
    if (v === undefined) return;
    props[`rt.workflow.${k}`] = v;
    // existing HTTP clients of the ecosystem read the dapr.* names
    props[`dapr.workflow.${k}`] = v;
  };
  put('input', rec.input);
  put('output', rec.output);
  put('custom_status', rec.customStatus);
  if (rec.stalled) put('stalled', `${rec.stalled.reason}: ${rec.stalled.description ?? 'no worker that answered has the version of this workflow'} (since ${new Date(rec.stalled.since).toISOString()})`);
  if (rec.failure) {
    put('failure.error_type', rec.failure.errorType);
    put('failure.error_message', rec.failure.errorMessage);
    put('failure.stack_trace', rec.failure.stackTrace?.value);
  }
  return {
    instanceID: rec.id,
    workflowName: rec.name,
    createdAt: new Date(rec.createdAt).toISOString(),
    lastUpdatedAt: new Date(rec.updatedAt).toISOString(),
    runtimeStatus: rec.status,
    properties: props,
  };
}

export async function registerRoutes(http: FastifyInstance, engine: Engine): Promise<void> {
  await rawBodyRoutes(http, (scope) => {
    for (const v of API_VERSIONS) {
      const base = `/${v}/workflows/:workflowComponent`;

      scope.post(`${base}/:workflowName/start`, { schema: schemas.WORKFLOW_START }, async (req: FastifyRequest, reply: FastifyReply) => {
        const p = req.params as Params;
        component(p);
        if (!p.workflowName) throw fail(ERRORS.WORKFLOW_NAME_MISSING, 'the workflow name is missing from the path');
        const q = req.query as Record<string, unknown>;
        // one string, else the schema's 400 ERR_INSTANCE_ID_INVALID
        const instanceId = (q.instanceID as string | undefined) || undefined;
        try {
          if (instanceId) checkInstanceId(instanceId, 'start');
          const id = await engine.start({ instanceId, name: p.workflowName, input: bodyText(req), trace: req.headers });
          return reply.status(202).send({ instanceID: id });
        } catch (e) {
          throw workflowApiError(e, 'START');
        }
      });

      const op = (path: string, schema: RouteSchema, code: WorkflowOperation, fn: (id: string, req: FastifyRequest) => Promise<unknown>) =>
        scope.post(`${base}/:instanceID/${path}`, { schema }, async (req: FastifyRequest, reply: FastifyReply) => {
          const p = req.params as Params;
          component(p);
          const id = lookupId(p);
          try {
            await fn(id, req);
          } catch (e) {
            throw workflowApiError(e, code);
          }
          return reply.status(202).send();
        });

      // HTTP terminate and purge always take the sub-orchestrations along (contract; the
      // reference runtime's HTTP and Dapr-API purge is recursive too)
      op('terminate', schemas.WORKFLOW_TERMINATE, 'TERMINATE', (id) => engine.terminate(id, undefined, true));
      op('pause', schemas.WORKFLOW_PAUSE, 'PAUSE', (id) => engine.suspend(id));
      op('resume', schemas.WORKFLOW_RESUME, 'RESUME', (id) => engine.resume(id));
      op('purge', schemas.WORKFLOW_PURGE, 'PURGE', (id) => engine.purge(id, true));
      op('raiseEvent/:eventName', schemas.WORKFLOW_RAISE_EVENT, 'RAISE_EVENT', (id, req) => {
        const name = (req.params as Params).eventName;
        if (!name) throw fail(ERRORS.WORKFLOW_EVENT_NAME_MISSING, 'the event name is missing from the path');
        return engine.raiseEvent(id, name, bodyText(req));
      });

      scope.get(`${base}/:instanceID`, { schema: schemas.WORKFLOW_GET }, async (req: FastifyRequest) => {
        const p = req.params as Params;
        component(p);
        const id = lookupId(p);
        const rec = await engine.get(id).catch((e) => {
          throw workflowApiError(e, 'GET');
        });
        if (!rec) throw fail(ERRORS.WORKFLOW_INSTANCE_NOT_FOUND, `no workflow instance with id "${id}"`);
        return toHttpInstance(rec);
      });
    }
  });
}
