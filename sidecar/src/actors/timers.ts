/**
 * Actor timers: in memory, with the activation. A timer fires through the actor's turn
 * (PUT /actors/<type>/<id>/method/timer/<name>), only while the actor is active, and is dropped
 * when the activation ends. A fire that fails is logged and the timer goes on, as the reference
 * does; the next fire is armed once a fire is over, so fires of one timer never overlap.
 */
import type { Logger } from 'pino';
import type { ActorApp, TimerPayload } from './app-calls.ts';
import { nextFire, type FireSchedule } from './schedule.ts';
import type { Activation, ActorTable } from './table.ts';

/** setTimeout's longest wait; longer ones are waited for in steps. */
const MAX_WAIT_MS = 2 ** 31 - 1;

export interface TimerSpec {
  name: string;
  schedule: FireSchedule;
  payload: TimerPayload;
}

export function startTimer(table: ActorTable, app: ActorApp, log: Logger, act: Activation, spec: TimerSpec): void {
  act.timers.get(spec.name)?.();
  let handle: NodeJS.Timeout | undefined;
  let stopped = false;
  let fired = 0;
  const stop = () => {
    stopped = true;
    clearTimeout(handle);
  };
  const arm = (at: number) => {
    const wait = Math.max(0, at - Date.now());
    handle = setTimeout(() => (wait > MAX_WAIT_MS ? arm(at) : void fire(at)), Math.min(wait, MAX_WAIT_MS));
    handle.unref();
  };
  const fire = async (at: number) => {
    if (stopped) return;
    if (spec.schedule.expiresAt !== undefined && Date.now() >= spec.schedule.expiresAt) return end();
    const release = await table.enterActive(act);
    if (!release) return;
    try {
      if (stopped) return;
      fired++;
      const res = await app.fireTimer(act.type, act.id, spec.name, spec.payload);
      if (res.status >= 300) log.warn({ actorType: act.type, actorId: act.id, timer: spec.name, status: res.status }, 'the app answered a timer with an error');
    } catch (e) {
      log.warn({ actorType: act.type, actorId: act.id, timer: spec.name, err: (e as Error).message }, 'a timer could not reach the app');
    } finally {
      release();
    }
    if (stopped) return;
    const next = nextFire(spec.schedule, at, fired);
    if (next === undefined) return end();
    arm(next);
  };
  const end = () => {
    if (act.timers.get(spec.name) === stop) act.timers.delete(spec.name);
  };
  act.timers.set(spec.name, stop);
  arm(spec.schedule.dueAt);
}

export function stopTimer(act: Activation, name: string): void {
  act.timers.get(name)?.();
  act.timers.delete(name);
}
