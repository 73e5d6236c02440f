/**
 * The jobs HTTP routes' schemas (http/schema.ts). A member of the wrong type answers the
 * scheduler's code for that field (`x-error-code`, e.g. RT_SCHEDULER_SCHEDULE_INVALID); what the
 * values mean (cron, durations, names) the scheduler's validator checks.
 */
import { route, type JsonSchema } from '../http/schema.ts';

const NAME = { '*:name': 'the job name' };

/** A job's failure policy (actor reminders take the same, actors/schemas.ts). */
export const FAILURE_POLICY: JsonSchema = {
  type: ['object', 'null'],
  'x-error-code': 'RT_SCHEDULER_FAILURE_POLICY_INVALID',
  description: '{"drop": {}} or {"constant": {"interval": "1s", "maxRetries": 3}}',
  properties: {
    drop: { type: ['object', 'null'] },
    constant: { type: ['object', 'null'], properties: { interval: { type: ['string', 'null'] }, maxRetries: { type: ['integer', 'null'], minimum: 0 } } },
  },
};

const FIELDS: Record<string, JsonSchema> = {
  schedule: { type: ['string', 'null'], 'x-error-code': 'RT_SCHEDULER_SCHEDULE_INVALID', description: 'a cron expression (6 fields) or an @ period (@every 1m, @daily …)' },
  dueTime: { type: ['string', 'null'], 'x-error-code': 'RT_SCHEDULER_DUE_TIME_INVALID', description: 'RFC 3339 time, duration from now, or ISO 8601' },
  ttl: { type: ['string', 'null'], 'x-error-code': 'RT_SCHEDULER_TTL_INVALID', description: 'RFC 3339 time, duration from now, or ISO 8601' },
  repeats: { type: ['integer', 'null'], 'x-error-code': 'RT_SCHEDULER_REPEATS_INVALID', description: 'how many times the job triggers' },
  data: { description: 'any JSON value, delivered to the app as the trigger body' },
  overwrite: { type: ['boolean', 'null'], description: 'replace a job of the same name' },
  failurePolicy: FAILURE_POLICY,
};

export const SCHEDULE = route('jobs.schedule', 'Schedule a job', {
  params: NAME,
  // earlier alpha clients wrapped the fields in {"job": {...}}
  body: {
    type: 'object',
    properties: { ...FIELDS, job: { type: 'object', properties: FIELDS } },
    description: 'send a JSON object with "schedule" and/or "dueTime", and optionally "data", "repeats", "ttl", "overwrite", "failurePolicy"',
  },
  responses: { '204': 'scheduled' },
});

export const GET = route('jobs.get', 'Get a job', { params: NAME, responses: { '200': 'the job: {name, schedule?, dueTime?, repeats?, ttl?, data?, failurePolicy?}' } });

export const DELETE = route('jobs.delete', 'Delete a job', { params: NAME, responses: { '204': 'deleted, or there was no such job' } });

export const LIST = route('jobs.list', "List the app's jobs", { responses: { '200': '{jobs: [...]}' } });

export const JOBS_SCHEMAS = [SCHEDULE, GET, DELETE, LIST];
