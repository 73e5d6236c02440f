/**
 * The actor HTTP routes' schemas (http/schema.ts). Method calls take any body, passed to the
 * app as sent; the JSON bodies (state transactions, timers, reminders) are read by the routes
 * themselves (any content type, as the SDKs send them) and checked here. Timer and reminder
 * times are strings; what they mean the service checks (actors/schedule.ts), for gRPC too.
 */
import { route, type JsonSchema } from '../http/schema.ts';
import { FAILURE_POLICY as JOB_FAILURE_POLICY } from '../jobs/schemas.ts';

const ACTOR = { actorType: 'the actor type (one the app declares in /dapr/config)', actorId: 'the actor id' };
const TIME: JsonSchema = { type: 'string' };

const SCHEDULE_PROPS: Record<string, JsonSchema> = {
  dueTime: { type: 'string', description: 'first fire: an RFC 3339 time, a Go duration (5s) or an ISO 8601 duration (PT5S); absent = now' },
  period: { type: 'string', description: 'between fires: a Go or ISO 8601 duration, or R<n>/<ISO duration>; absent = once' },
  ttl: TIME,
  data: { description: 'any JSON value, given to the app with each fire' },
};

export const INVOKE = route('actors.invoke', 'Invoke a method of an actor (GET, POST, PUT or DELETE): one call at a time per actor', {
  params: { ...ACTOR, method: 'the method' },
  headers: { 'dapr-reentrancy-id': 'the reentrant chain this call belongs to (rt-reentrancy-id too), when the app enables reentrancy' },
  anyBody: 'any content, given to the app as sent',
  responses: { '200': "the app's answer: status, content type and body as it sent them" },
});

export const STATE_GET = route('actors.stateGet', "Get an item of an actor's state", {
  params: { ...ACTOR, key: 'the state key' },
  responses: { '200': 'the stored value (JSON as saved)', '204': 'no such item' },
});

export const STATE_TRANSACTION = route('actors.stateTransaction', "Save and delete items of an actor's state in one transaction", {
  params: ACTOR,
  ownBody: {
    type: 'array',
    description: 'send [{"operation": "upsert", "request": {"key": "k", "value": <any JSON>}}, {"operation": "delete", "request": {"key": "k2"}}]',
    items: {
      type: 'object',
      required: ['operation', 'request'],
      properties: {
        operation: { type: 'string' },
        request: {
          type: 'object',
          required: ['key'],
          properties: { key: { type: 'string' }, value: {}, metadata: { type: 'object', additionalProperties: { type: 'string' } } },
        },
      },
    },
  },
  responses: { '204': 'saved' },
});

export const TIMER_CREATE = route('actors.timerCreate', 'Create (or replace) a timer of an active actor: in memory, gone with the activation', {
  params: { ...ACTOR, name: 'the timer name' },
  ownBody: { type: 'object', properties: { ...SCHEDULE_PROPS, callback: { type: 'string', description: 'the actor method the SDK calls' } } },
  responses: { '204': 'created' },
});

export const TIMER_DELETE = route('actors.timerDelete', 'Delete a timer of an actor', {
  params: { ...ACTOR, name: 'the timer name' },
  responses: { '204': 'deleted (or there was none)' },
});

/** A reminder's failure policy: the jobs API's form; what its values mean reminder-request.ts checks (for gRPC too). */
const FAILURE_POLICY: JsonSchema = {
  ...JOB_FAILURE_POLICY,
  'x-error-code': 'ERR_ACTOR_REMINDER_CREATE',
  description: 'what the scheduler does with a fire the app fails: {"drop": {}} or {"constant": {"interval": "1s", "maxRetries": 3}} (maxRetries absent = until it succeeds); absent = constant 1s, 3 retries',
};

export const REMINDER_CREATE = route('actors.reminderCreate', 'Create (or replace) a reminder of an actor: a durable job in the scheduler', {
  params: { ...ACTOR, name: 'the reminder name' },
  ownBody: {
    type: 'object',
    properties: {
      ...SCHEDULE_PROPS,
      overwrite: { type: ['boolean', 'null'], 'x-error-code': 'ERR_ACTOR_REMINDER_CREATE', description: 'replace a reminder of the same name (default true); false answers 409 ERR_ACTOR_REMINDER_ALREADY_EXISTS when one exists' },
      failurePolicy: FAILURE_POLICY,
      failure_policy: { ...FAILURE_POLICY, description: 'failurePolicy under the reference runtime\'s JSON name' },
    },
  },
  responses: { '204': 'created', '409': 'overwrite false and a reminder of that name exists' },
});

export const REMINDER_GET = route('actors.reminderGet', 'Get a reminder of an actor as registered', {
  params: { ...ACTOR, name: 'the reminder name' },
  responses: { '200': '{"actorType", "actorID", "name", "dueTime", "period", "ttl", "data"}', '404': 'no such reminder' },
});

export const REMINDER_DELETE = route('actors.reminderDelete', 'Delete a reminder of an actor', {
  params: { ...ACTOR, name: 'the reminder name' },
  responses: { '204': 'deleted (or there was none)' },
});

export const ACTORS_SCHEMAS = [INVOKE, STATE_GET, STATE_TRANSACTION, TIMER_CREATE, TIMER_DELETE, REMINDER_CREATE, REMINDER_GET, REMINDER_DELETE];
