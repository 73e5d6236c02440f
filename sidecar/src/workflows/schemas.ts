/**
 * The workflow HTTP routes' schemas (http/schema.ts), with the reference runtime's names
 * (`workflowComponent`, `instanceID`, `workflowName`, `eventName`). The same routes answer under
 * /v1.0, /v1.0-beta1 and /v1.0-alpha1 with these schemas. Bodies are taken raw (the start input,
 * the event's data). What an id may hold the engine checks (workflows/ids.ts), for gRPC too.
 */
import { route, type JsonSchema } from '../http/schema.ts';

const COMPONENT = { workflowComponent: 'the workflow component: "rt" (or its alias "dapr")' };
const INSTANCE = { ...COMPONENT, instanceID: 'the workflow instance id' };
// a repeated instanceID is the reference's bad-id answer, not a generic malformed request
const INSTANCE_ID_QUERY: JsonSchema = { type: 'string', 'x-error-code': 'ERR_INSTANCE_ID_INVALID', description: 'the new instance id (1 to 64 letters, digits, "_" or "-"); one is made when absent' };
const IGNORED = 'ignored';

export const WORKFLOW_START = route('workflows.start', 'Start a workflow instance', {
  params: { ...COMPONENT, workflowName: 'the workflow (as the worker registered it)' },
  query: { instanceID: INSTANCE_ID_QUERY },
  anyBody: 'the input, as sent (usually JSON)',
  responses: { '202': '{"instanceID": "..."}' },
});

export const WORKFLOW_GET = route('workflows.get', 'Get a workflow instance', {
  params: INSTANCE,
  responses: { '200': '{"instanceID", "workflowName", "createdAt", "lastUpdatedAt", "runtimeStatus", "properties"}' },
});

export const WORKFLOW_TERMINATE = route('workflows.terminate', 'Terminate a workflow instance and its child workflows', { params: INSTANCE, anyBody: IGNORED, responses: { '202': 'terminated' } });
export const WORKFLOW_PAUSE = route('workflows.pause', 'Pause (suspend) a workflow instance', { params: INSTANCE, anyBody: IGNORED, responses: { '202': 'paused' } });
export const WORKFLOW_RESUME = route('workflows.resume', 'Resume a paused workflow instance', { params: INSTANCE, anyBody: IGNORED, responses: { '202': 'resumed' } });
export const WORKFLOW_PURGE = route('workflows.purge', 'Remove a finished workflow instance and its child workflows', { params: INSTANCE, anyBody: IGNORED, responses: { '202': 'purged' } });

export const WORKFLOW_RAISE_EVENT = route('workflows.raiseEvent', 'Raise an event for a workflow instance', {
  params: { ...INSTANCE, eventName: 'the event name the workflow waits for' },
  anyBody: "the event's data, as sent (usually JSON)",
  responses: { '202': 'raised' },
});

export const WORKFLOWS_SCHEMAS = [WORKFLOW_START, WORKFLOW_GET, WORKFLOW_TERMINATE, WORKFLOW_PAUSE, WORKFLOW_RESUME, WORKFLOW_PURGE, WORKFLOW_RAISE_EVENT];
