/**
 * The scheduler engine on fake time (a ManualClock): fires, retries, ack timeouts, ttl and
 * progress writes happen when the test moves the clock, never by waiting.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { CONSUMER_WINDOW, SchedulerEngine } from '../../scheduler/src/engine.ts';
import { SqliteJobStore } from '../../scheduler/src/store/sqlite.ts';
import type { JobKey, Trigger } from '../../scheduler/src/types.ts';
import { ManualClock } from '../../shared/clock.ts';

const target = { namespace: 'ns', appId: 'a' };
const key = (name: string, owner = ''): JobKey => ({ ...target, owner, name });

describe('scheduler engine (SQLite in memory, fake time)', () => {
  const engines: SchedulerEngine[] = [];
  let clock: ManualClock;
  const start = async (ackTimeoutMs?: number) => {
    clock = new ManualClock();
    const e = new SchedulerEngine({ log: pino({ level: 'silent' }), store: new SqliteJobStore(':memory:'), ackTimeoutMs, clock });
    await e.start();
    engines.push(e);
    return e;
  };
  afterEach(async () => {
    for (const e of engines.splice(0)) await e.close();
  });

  it('drops a waiting trigger whose job was replaced, and fires the replacement', async () => {
    const e = await start();
    await e.schedule(key('j'), { dueTime: '0s', dataJson: '"old"' }, false);
    await clock.advance(50); // due with no consumer: waits
    await e.schedule(key('j'), { dueTime: '0s', dataJson: '"new"' }, true);
    await clock.advance(50);
    const got: Trigger[] = [];
    e.connect(target, { name: 'c', send: (t) => (got.push(t), e.ack(t.id, true)) });
    await clock.advance(60_000);
    expect(got.map((t) => t.dataJson)).toEqual(['"new"']);
  });

  it('moves the triggers a disconnected sidecar had not acked to another one', async () => {
    const e = await start();
    const held: Trigger[] = [];
    const disconnect = e.connect(target, { name: 'silent', send: (t) => held.push(t) });
    for (let i = 0; i < 5; i++) await e.schedule(key(`m${i}`), { dueTime: '0s' }, false);
    await clock.advance(0);
    expect(held).toHaveLength(5);
    const got: Trigger[] = [];
    e.connect(target, { name: 'second', send: (t) => (got.push(t), e.ack(t.id, true)) });
    disconnect();
    expect(got).toHaveLength(5);
    expect(new Set(got.map((t) => t.key.name)).size).toBe(5);
    await clock.advance(1000);
    expect(e.snapshot()).toMatchObject({ jobs: 0, inflight: 0, pending: 0 });
  });

  it('gives one sidecar at most CONSUMER_WINDOW un-acked triggers; acks let the rest through', async () => {
    const e = await start();
    const held: Trigger[] = [];
    e.connect(target, { name: 'slow', send: (t) => held.push(t) });
    const n = CONSUMER_WINDOW + 200;
    for (let i = 0; i < n; i++) await e.schedule(key(`w${i}`), { dueTime: '0s' }, false);
    await clock.advance(0);
    expect(held.length).toBe(CONSUMER_WINDOW);
    expect(e.snapshot().pending).toBe(200);
    for (const t of held.splice(0, 150)) e.ack(t.id, true);
    expect(held.length).toBe(CONSUMER_WINDOW); // 150 acked, 150 more sent at once
    for (const t of held.splice(0)) e.ack(t.id, true);
    expect(held.length).toBe(50);
    for (const t of held.splice(0)) e.ack(t.id, true);
    expect(e.snapshot()).toMatchObject({ pending: 0, inflight: 0, acked: n });
  });

  it('counts a trigger never acked as failed after the ack timeout, and retries it', async () => {
    const e = await start(300);
    const seen: Trigger[] = [];
    e.connect(target, {
      name: 'slow',
      send: (t) => {
        seen.push(t);
        if (t.attempt > 0) e.ack(t.id, true); // the first one is never answered
      },
    });
    await e.schedule(key('lost-ack'), { dueTime: '0s', failurePolicy: { kind: 'constant', intervalMs: 10, maxRetries: 2 } }, false);
    await clock.advance(0);
    expect(seen.map((t) => t.attempt)).toEqual([0]);
    // the sweep at 300 ms finds it older than the ack timeout only at the next one (600 ms); the retry 10 ms later
    await clock.advance(599);
    expect(seen).toHaveLength(1);
    await clock.advance(11);
    expect(seen.map((t) => t.attempt)).toEqual([0, 1]);
  });

  it('removes a job at its ttl when its next fire lies beyond it', async () => {
    const e = await start();
    e.connect(target, { name: 'c', send: (t) => e.ack(t.id, true) });
    await e.schedule(key('ttl'), { schedule: '@every 1h', ttl: '150ms' }, false);
    await clock.advance(149);
    expect((await e.list({ ...target, owner: '' })).map((r) => r.key.name)).toEqual(['ttl']);
    await clock.advance(2);
    expect(await e.list({ ...target, owner: '' })).toEqual([]);
    await expect(e.get(key('ttl'))).rejects.toMatchObject({ kind: 'not_found' });
    expect(e.snapshot().jobs).toBe(0);
  });

  it('keeps owners apart: same name, different owner, two jobs', async () => {
    const e = await start();
    await e.schedule(key('same'), { dueTime: '1h', dataJson: '1' }, false);
    await e.schedule(key('same', 'workflows'), { dueTime: '1h', dataJson: '2' }, false);
    expect((await e.get(key('same'))).spec.dataJson).toBe('1');
    expect((await e.get(key('same', 'workflows'))).spec.dataJson).toBe('2');
    expect((await e.list({ ...target, owner: '' })).map((r) => r.key.owner)).toEqual(['']);
  });
});
