/**
 * The actor methods of the runtime API, on the actors block's service (actors/service.ts, the
 * one its HTTP API uses: checks, the host lookup, the actor's turn, the app call and the error
 * table's rows). Here the messages are decoded and encoded: data fields are bytes; a timer's or
 * reminder's data is given to the app as the JSON it holds (as its HTTP form sends it), or as
 * text when it is not JSON.
 */
import type { SidecarContext } from '../../context.ts';
import { failurePolicyOfMsg, type FailurePolicyMsg, type ReminderRequest } from '../../actors/reminder-request.ts';
import type { StoredReminder } from '../../actors/reminders.ts';
import type { ActorsService } from '../../actors/service.ts';
import { ERRORS, fail } from '../../api/errors.ts';
import { ApiError } from '../../http/errors.ts';

interface ActorRef {
  actor_type: string;
  actor_id: string;
}
interface InvokeReq extends ActorRef {
  method: string;
  data: Uint8Array;
  metadata: Record<string, string>;
}
interface StateOpMsg {
  operationType: string;
  key: string;
  value?: { type_url?: string; value?: Uint8Array } | null;
  metadata: Record<string, string>;
}
interface ScheduleReq extends ActorRef {
  name: string;
  due_time: string;
  period: string;
  ttl: string;
  data: Uint8Array;
  callback?: string;
}
interface ReminderReq extends ScheduleReq {
  /** proto3 optional: undefined when unset (= true, the reference's default). */
  overwrite?: boolean;
  failure_policy?: FailurePolicyMsg | null;
}

/** Bytes as the JSON value they hold, else their text; none is null. */
function dataOf(b: Uint8Array | undefined): unknown {
  if (!b || b.length === 0) return null;
  const text = Buffer.from(b).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function looksJson(b: Uint8Array): boolean {
  try {
    JSON.parse(Buffer.from(b).toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** A reminder as the gRPC messages carry it: its data as the JSON it holds. */
function reminderMsg(r: StoredReminder) {
  return { actor_type: r.actorType, actor_id: r.actorId, due_time: r.dueTime, period: r.period, ttl: r.ttl, data: { type_url: '', value: Buffer.from(JSON.stringify(r.data ?? null)) } };
}

export function actorMethods(ctx: SidecarContext) {
  const actors = (): ActorsService => {
    const s = ctx.services.actors;
    if (!s) throw new ApiError(501, 'ERR_API_UNIMPLEMENTED', 'the actors building block is not running');
    return s;
  };
  return {
    async InvokeActor(req: InvokeReq): Promise<{ data: Buffer }> {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.metadata ?? {})) headers[k.toLowerCase()] = v;
      const data = req.data ?? new Uint8Array();
      if (!headers['content-type'] && data.length > 0 && looksJson(data)) headers['content-type'] = 'application/json';
      const res = await actors().invoke(req.actor_type, req.actor_id, req.method, data, headers);
      if (res.status >= 300) throw fail(ERRORS.ACTOR_INVOKE_FAILED, `error invoking actor ${req.actor_type}/${req.actor_id} method ${req.method}: the app answered ${res.status}: ${res.body.toString('utf8').slice(0, 500)}`);
      return { data: res.body };
    },

    async GetActorState(req: ActorRef & { key: string }): Promise<{ data: Buffer; metadata: Record<string, string> }> {
      const v = await actors().getState(req.actor_type, req.actor_id, req.key);
      return { data: v ? Buffer.from(v) : Buffer.alloc(0), metadata: {} };
    },

    async ExecuteActorStateTransaction(req: ActorRef & { operations: StateOpMsg[] }): Promise<Record<string, never>> {
      await actors().transact(
        req.actor_type,
        req.actor_id,
        (req.operations ?? []).map((o) => ({ operation: o.operationType, key: o.key, value: o.value?.value ?? new Uint8Array(), metadata: o.metadata })),
      );
      return {};
    },

    async RegisterActorTimer(req: ScheduleReq): Promise<Record<string, never>> {
      await actors().createTimer(req.actor_type, req.actor_id, req.name, { dueTime: req.due_time, period: req.period, ttl: req.ttl, callback: req.callback, data: dataOf(req.data) });
      return {};
    },

    async UnregisterActorTimer(req: ActorRef & { name: string }): Promise<Record<string, never>> {
      await actors().deleteTimer(req.actor_type, req.actor_id, req.name);
      return {};
    },

    async RegisterActorReminder(req: ReminderReq): Promise<Record<string, never>> {
      const reminder: ReminderRequest = {
        dueTime: req.due_time,
        period: req.period,
        ttl: req.ttl,
        data: dataOf(req.data),
        overwrite: req.overwrite ?? true,
        failurePolicy: failurePolicyOfMsg(req.failure_policy),
      };
      await actors().createReminder(req.actor_type, req.actor_id, req.name, reminder);
      return {};
    },

    async UnregisterActorReminder(req: ActorRef & { name: string }): Promise<Record<string, never>> {
      await actors().deleteReminder(req.actor_type, req.actor_id, req.name);
      return {};
    },

    async GetActorReminder(req: ActorRef & { name: string }) {
      return reminderMsg(await actors().getReminder(req.actor_type, req.actor_id, req.name));
    },

    async ListActorReminders(req: { actor_type: string; actor_id?: string }) {
      const list = await actors().listReminders(req.actor_type, req.actor_id);
      return { reminders: list.map((r) => ({ name: r.name, reminder: reminderMsg(r) })) };
    },

    async UnregisterActorRemindersByType(req: { actor_type: string; actor_id?: string }): Promise<Record<string, never>> {
      await actors().deleteRemindersOf(req.actor_type, req.actor_id);
      return {};
    },
  };
}
