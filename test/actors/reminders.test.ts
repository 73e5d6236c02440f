/**
 * Actor reminders' newer fields and calls: a real sidecar with its embedded scheduler (the
 * grpc harness, on its data dir), an app hosting actor types (app.ts: a reminder whose name
 * starts with "fail" is answered 500). overwrite false against an existing reminder, failure
 * policies carried into the reminder's job (constant with 2 retries = 3 attempts, drop = 1),
 * the alpha calls over gRPC, remindersStoragePartitions accepted and said at debug level, and
 * bad input 4xx / INVALID_ARGUMENT naming the field (fast-check over the parser and the route).
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reminderRequestOf } from '../../sidecar/src/actors/reminder-request.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { startRuntimeSidecar, type RuntimeSidecar } from '../grpc/harness.ts';
import { startActorApp, type ActorTestApp } from './app.ts';

const CONFIG = { entities: ['Remindable', 'Listed'], remindersStoragePartitions: 4 };

let app: ActorTestApp;
let rt: RuntimeSidecar;
let base: string;
const logLines: string[] = [];

beforeAll(async () => {
  app = await startActorApp(CONFIG);
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
  rt = await startRuntimeSidecar({ appId: `reminders-${randomUUID().slice(0, 8)}`, appPort: app.port, logger });
  app.sidecarPort = rt.sidecar.httpPort;
  base = `http://127.0.0.1:${rt.sidecar.httpPort}`;
  // the app's types are known once the metadata lists them
  const deadline = Date.now() + 10_000;
  for (;;) {
    const md = (await (await fetch(`${base}/v1.0/metadata`)).json()) as { actors: { type: string }[] };
    if (md.actors.some((a) => a.type === 'Remindable')) break;
    if (Date.now() > deadline) throw new Error('the sidecar never learnt the app actor types');
    await new Promise((r) => setTimeout(r, 20));
  }
}, 30_000);

afterAll(async () => {
  await rt?.stop();
  await app?.close();
});

const url = (type: string, id: string, name: string) => `${base}/v1.0/actors/${type}/${id}/reminders/${name}`;
const register = (type: string, id: string, name: string, body: unknown) => fetch(url(type, id, name), { method: 'POST', body: JSON.stringify(body) });
const attempts = (id: string, name: string) => app.log.reminders.filter((r) => r.id === id && r.name === name).length;

/** Waits until the reminder's job is over (GET 404): every fire and retry has happened. */
async function untilGone(type: string, id: string, name: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while ((await fetch(url(type, id, name))).status !== 404) {
    if (Date.now() > deadline) throw new Error(`reminder ${name} of ${type}/${id} is still there after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('overwrite', () => {
  it('replaces by default and with true; false on an existing name is 409 ERR_ACTOR_REMINDER_ALREADY_EXISTS and keeps the first', async () => {
    const id = randomUUID();
    const dueOf = async () => ((await (await fetch(url('Remindable', id, 'r'))).json()) as { dueTime: string }).dueTime;
    expect((await register('Remindable', id, 'r', { dueTime: '1h', overwrite: false })).status).toBe(204);
    const refused = await register('Remindable', id, 'r', { dueTime: '2h', overwrite: false });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ errorCode: 'ERR_ACTOR_REMINDER_ALREADY_EXISTS', message: 'actor reminder already exists: r' });
    expect(await dueOf()).toBe('1h');
    expect((await register('Remindable', id, 'r', { dueTime: '3h' })).status).toBe(204);
    expect(await dueOf()).toBe('3h');
    expect((await register('Remindable', id, 'r', { dueTime: '4h', overwrite: true })).status).toBe(204);
    expect(await dueOf()).toBe('4h');
    expect((await fetch(url('Remindable', id, 'r'), { method: 'DELETE' })).status).toBe(204);
  });

  it('over gRPC: overwrite false on an existing name is ALREADY_EXISTS, unset replaces', async () => {
    const id = randomUUID();
    const req = { actor_type: 'Remindable', actor_id: id, name: 'g', due_time: '1h' };
    await rt.call('RegisterActorReminder', { ...req, overwrite: false });
    const e = await rt.fail('RegisterActorReminder', { ...req, due_time: '2h', overwrite: false });
    expect(e.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(e.details).toBe('actor reminder already exists: g');
    expect(e.metadata.get('rt-error-code')[0]).toBe('ERR_ACTOR_REMINDER_ALREADY_EXISTS');
    await rt.call('RegisterActorReminder', { ...req, due_time: '3h' });
    expect((await rt.call<{ due_time: string }>('GetActorReminder', { actor_type: 'Remindable', actor_id: id, name: 'g' })).due_time).toBe('3h');
    await rt.call('UnregisterActorReminder', { actor_type: 'Remindable', actor_id: id, name: 'g' });
  });
});

describe('failure policy', () => {
  it('constant with 2 retries: the app sees exactly 3 attempts of a failing fire (HTTP)', async () => {
    const id = randomUUID();
    expect((await register('Remindable', id, 'fail-c', { dueTime: '0s', failurePolicy: { constant: { interval: '50ms', maxRetries: 2 } } })).status).toBe(204);
    await untilGone('Remindable', id, 'fail-c');
    expect(attempts(id, 'fail-c')).toBe(3);
    // retried at the policy's pace, not the default 1 s
    const at = app.log.reminders.filter((r) => r.id === id).map((r) => r.at);
    expect(at[2]! - at[0]!).toBeLessThan(1500);
  });

  it('constant with 2 retries over gRPC (a google.protobuf.Duration interval): 3 attempts', async () => {
    const id = randomUUID();
    await rt.call('RegisterActorReminder', { actor_type: 'Remindable', actor_id: id, name: 'fail-g', due_time: '0s', failure_policy: { constant: { interval: { seconds: 0, nanos: 50_000_000 }, max_retries: 2 } } });
    await untilGone('Remindable', id, 'fail-g');
    expect(attempts(id, 'fail-g')).toBe(3);
  });

  it('drop: the app sees 1 attempt (HTTP, and over gRPC); the reference JSON name failure_policy works too', async () => {
    const id = randomUUID();
    expect((await register('Remindable', id, 'fail-d', { dueTime: '0s', failurePolicy: { drop: {} } })).status).toBe(204);
    expect((await register('Remindable', id, 'fail-s', { dueTime: '0s', failure_policy: { drop: {} } })).status).toBe(204);
    await rt.call('RegisterActorReminder', { actor_type: 'Remindable', actor_id: id, name: 'fail-dg', due_time: '0s', failure_policy: { drop: {} } });
    for (const name of ['fail-d', 'fail-s', 'fail-dg']) {
      await untilGone('Remindable', id, name);
      expect({ name, attempts: attempts(id, name) }).toEqual({ name, attempts: 1 });
    }
  });

  it('a periodic reminder goes on after a dropped fire', async () => {
    const id = randomUUID();
    expect((await register('Remindable', id, 'fail-p', { dueTime: '0s', period: 'R3/PT0.05S', failurePolicy: { drop: {} } })).status).toBe(204);
    await untilGone('Remindable', id, 'fail-p');
    expect(attempts(id, 'fail-p')).toBe(3);
  });
});

describe('the alpha reminder calls over gRPC', () => {
  it('GetActorReminder, ListActorReminders by type and by actor, UnregisterActorRemindersByType', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    for (const [id, name] of [[a, 'x'], [a, 'y'], [b, 'z']] as const) {
      await rt.call('RegisterActorReminder', { actor_type: 'Listed', actor_id: id, name, due_time: '1h', period: '10m', ttl: '', data: Buffer.from('{"k":1}') });
    }
    const one = await rt.call<{ actor_type: string; actor_id: string; due_time: string; period: string; data: { value: Buffer } }>('GetActorReminder', { actor_type: 'Listed', actor_id: a, name: 'x' });
    expect({ ...one, data: JSON.parse(one.data.value.toString()) }).toMatchObject({ actor_type: 'Listed', actor_id: a, due_time: '1h', period: '10m', data: { k: 1 } });
    type Listed = { reminders: { name: string; reminder: { actor_id: string } }[] };
    const names = async (req: object) => (await rt.call<Listed>('ListActorReminders', { actor_type: 'Listed', ...req })).reminders.map((r) => `${r.reminder.actor_id === a ? 'a' : 'b'}/${r.name}`).sort();
    expect(await names({})).toEqual(['a/x', 'a/y', 'b/z']);
    expect(await names({ actor_id: b })).toEqual(['b/z']);
    await rt.call('UnregisterActorRemindersByType', { actor_type: 'Listed', actor_id: a });
    expect(await names({})).toEqual(['b/z']);
    await rt.call('UnregisterActorRemindersByType', { actor_type: 'Listed' });
    expect(await names({})).toEqual([]);
    const missing = await rt.fail('GetActorReminder', { actor_type: 'Listed', actor_id: a, name: 'x' });
    expect(missing.code).toBe(grpc.status.NOT_FOUND);
    // the reference's message (its tests/integration/suite/actors/reminders/scheduler/get.go checks it)
    expect(missing.details).toBe('actor reminder not found: x');
  });

  it('SubscribeActorEventsAlpha1 (the one actor call not served) answers UNIMPLEMENTED with a message', async () => {
    const id = (b: Buffer) => b;
    const call = rt.client.makeBidiStreamRequest('/dapr.proto.runtime.v1.Dapr/SubscribeActorEventsAlpha1', id, id, new grpc.Metadata());
    const err = await new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
    expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(err.details).toContain('actor event streaming');
  });
});

describe('remindersStoragePartitions', () => {
  it('is accepted, has no effect, and the sidecar says so at debug level', () => {
    const line = logLines.find((l) => l.includes('remindersStoragePartitions'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: 20 });
    expect(line).toContain('no effect');
  });
});

describe('bad input', () => {
  it('an invalid failure policy or overwrite is a 400 ERR_ACTOR_REMINDER_CREATE naming the field', async () => {
    const id = randomUUID();
    for (const [body, field] of [
      [{ failurePolicy: { exponential: {} } }, 'failurePolicy'],
      [{ failurePolicy: {} }, 'failurePolicy'],
      [{ failurePolicy: { drop: {}, constant: {} } }, 'failurePolicy'],
      [{ failurePolicy: 'drop' }, 'failurePolicy'],
      [{ failurePolicy: { constant: { maxRetries: -1 } } }, 'maxRetries'],
      [{ failurePolicy: { constant: { maxRetries: 1.5 } } }, 'maxRetries'],
      [{ failurePolicy: { constant: { interval: 'soon' } } }, 'interval'],
      [{ failurePolicy: { constant: { interval: '-1s' } } }, 'interval'],
      [{ failure_policy: { constant: { interval: 5 } } }, 'interval'],
      [{ overwrite: 'yes' }, 'overwrite'],
    ] as const) {
      const r = await register('Remindable', id, 'bad', { dueTime: '1h', ...body });
      const e = (await r.json()) as { errorCode: string; message: string };
      expect({ body, status: r.status, code: e.errorCode }).toEqual({ body, status: 400, code: 'ERR_ACTOR_REMINDER_CREATE' });
      expect(e.message, JSON.stringify(body)).toContain(field);
    }
    expect((await fetch(url('Remindable', id, 'bad'))).status).toBe(404);
  });

  it('over gRPC: a policy with no kind or a negative interval is INVALID_ARGUMENT naming failure_policy', async () => {
    const id = randomUUID();
    for (const policy of [{}, { constant: { interval: { seconds: -1, nanos: 0 } } }]) {
      const e = await rt.fail('RegisterActorReminder', { actor_type: 'Remindable', actor_id: id, name: 'bad', due_time: '1h', failure_policy: policy });
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(e.metadata.get('rt-error-code')[0]).toBe('ERR_ACTOR_REMINDER_CREATE');
      expect(e.details).toContain('failure_policy');
    }
  });

  it('property: the reminder request parser returns, or throws a 400 ApiError, for any JSON value', async () => {
    const fc = await import('fast-check');
    const policy = fc.oneof(
      fc.jsonValue(),
      fc.record({ drop: fc.oneof(fc.constant({}), fc.jsonValue()), constant: fc.oneof(fc.jsonValue(), fc.record({ interval: fc.oneof(fc.string(), fc.constantFrom('1s', '-1s', '500ms', '1h30m', 'PT1S'), fc.jsonValue()), maxRetries: fc.oneof(fc.integer(), fc.double(), fc.jsonValue()) }, { requiredKeys: [] })) }, { requiredKeys: [] }),
    );
    const body = fc.oneof(fc.jsonValue(), fc.record({ dueTime: fc.jsonValue(), period: fc.jsonValue(), ttl: fc.jsonValue(), data: fc.jsonValue(), overwrite: fc.oneof(fc.boolean(), fc.jsonValue()), failurePolicy: policy, failure_policy: policy }, { requiredKeys: [] }));
    fc.assert(
      fc.property(body, (b) => {
        try {
          const r = reminderRequestOf(b);
          expect(typeof r.overwrite).toBe('boolean');
          if (r.failurePolicy?.kind === 'constant') expect(r.failurePolicy.intervalMs).toBeGreaterThanOrEqual(0);
        } catch (e) {
          expect(e).toBeInstanceOf(ApiError);
          expect((e as ApiError).status).toBe(400);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('property: any body to the reminder route gives 204, 409 or a 4xx JSON error, never a 5xx', async () => {
    const fc = await import('fast-check');
    const id = randomUUID();
    const policy = fc.oneof(fc.jsonValue(), fc.constant({ drop: {} }), fc.record({ constant: fc.record({ interval: fc.oneof(fc.string(), fc.constantFrom('1s', '-1s', '99999999h')), maxRetries: fc.oneof(fc.integer(), fc.constant(2 ** 40)) }, { requiredKeys: [] }) }));
    const bodies = fc.oneof(
      fc.string(),
      fc.json(),
      fc.record({ dueTime: fc.constantFrom('1h', '2h', 'soon'), overwrite: fc.oneof(fc.boolean(), fc.jsonValue()), failurePolicy: policy, failure_policy: policy, data: fc.jsonValue() }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
    );
    await fc.assert(
      fc.asyncProperty(bodies, async (body) => {
        const r = await fetch(url('Remindable', id, 'p'), { method: 'POST', body });
        if (r.status === 204) return;
        expect(r.status, body).toBeGreaterThanOrEqual(400);
        expect(r.status, body).toBeLessThan(500);
        expect(((await r.json()) as { errorCode: string }).errorCode).toMatch(/^ERR_/);
      }),
      { numRuns: 60 },
    );
    await fetch(url('Remindable', id, 'p'), { method: 'DELETE' });
  });
});
