/**
 * The actor runtime's operations, one method each, shared by the HTTP API (routes.ts) and the
 * gRPC API (grpc/runtime/actors.ts): their checks, the host lookup, the actor's turn, the call
 * to the app and the errors (api/errors.ts).
 *
 * State lives in the state store marked `actorStateStore: "true"` under the reference runtime's
 * keys, `<appId>||<type>||<id>||<key>` (the store's keyPrefix does not apply, as in the
 * reference), so state written by it reads back here; values are the bytes as given (the HTTP
 * API's JSON text, the gRPC API's bytes).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AppResponse } from '../app/channel.ts';
import { ERRORS, fail, failAs } from '../api/errors.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { StateStore, StateTransactionOperation } from '../components/types.ts';
import { ApiError, malformed } from '../http/errors.ts';
import { REENTRANCY_HEADERS, type ActorApp } from './app-calls.ts';
import { DEFAULTS, type ActorsConfig, type ActorTypeConfig } from './config.ts';
import type { ActorPlacement } from './placement/types.ts';
import type { ActorReminders, StoredReminder } from './reminders.ts';
import { parseSchedule } from './schedule.ts';
import { ActorTable } from './table.ts';
import { startTimer, stopTimer } from './timers.ts';
import { StackDepthError } from './turns.ts';

export interface ActorStateOperation {
  operation: string;
  key: string;
  /** upsert: the value's bytes. */
  value?: Uint8Array;
  metadata?: Record<string, string>;
}

export interface ScheduleRequest {
  dueTime?: string;
  period?: string;
  ttl?: string;
  data?: unknown;
}

export interface TimerRequest extends ScheduleRequest {
  callback?: string;
}

export interface ActorsServiceOptions {
  appId: string;
  log: Logger;
  components: ComponentRegistry;
  placement: ActorPlacement;
  app: ActorApp;
  /** Absent when no scheduler is configured: reminders answer so. */
  reminders?: ActorReminders;
}

const MAX_NAME = 1024;
const SHUTDOWN_DRAIN_MS = 5000;

export class ActorsService {
  private readonly opts: ActorsServiceOptions;
  private readonly log: Logger;
  private config: ActorsConfig = { entities: [], scanIntervalMs: DEFAULTS.scanIntervalMs, types: new Map(), ignored: [] };
  readonly table: ActorTable;
  private configured!: () => void;
  /** Settles once the app's actor types are known (reminders that fire early wait for it). */
  readonly typesKnown = new Promise<void>((r) => (this.configured = r));

  constructor(opts: ActorsServiceOptions) {
    this.opts = opts;
    this.log = opts.log;
    this.table = new ActorTable(opts.app, opts.log, (t) => this.configOf(t));
    opts.reminders?.onFire((r) => this.fireReminder(r));
    // a new table: the actors that moved to another host end here
    opts.placement.onChange(() => void this.table.drain((act) => !opts.placement.lookup(act.type, act.id)?.local));
  }

  /** The app's actor settings (from its config discovery): placement learns the hosted types. */
  configure(config: ActorsConfig): void {
    this.config = config;
    this.opts.placement.setHostedTypes(config.entities);
    if (config.entities.length > 0) this.table.startIdleScan(config.scanIntervalMs);
    this.configured();
  }

  get hostedTypes(): string[] {
    return this.config.entities;
  }

  configOf(type: string): ActorTypeConfig {
    return this.config.types.get(type) ?? DEFAULTS;
  }

  /** Active actors per hosted type (the metadata API's `actors`). */
  activeCounts(): { type: string; count: number }[] {
    const counts = this.table.counts();
    return this.config.entities.map((type) => ({ type, count: counts.get(type) ?? 0 }));
  }

  // ------------------------------------------------------------ invoke

  /**
   * Calls a method of an actor through its turn. The app's answer comes back as it gave it
   * (status, content type, body), as the reference passes it on.
   */
  async invoke(type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>): Promise<AppResponse> {
    checkActor(type, id);
    if (method === '') throw malformed('the actor method is empty: call /v1.0/actors/<type>/<id>/method/<method>');
    await this.local(type, id, ERRORS.ACTOR_INVOKE_FAILED);
    const cfg = this.configOf(type);
    let chain = reentrancyIdOf(headers);
    const out: Record<string, string> = {};
    if (headers['content-type']) out['content-type'] = headers['content-type'];
    if (cfg.reentrancy.enabled) {
      chain ??= randomUUID();
      out['dapr-reentrancy-id'] = chain;
      out['rt-reentrancy-id'] = chain;
    }
    let turn;
    try {
      turn = await this.table.enter(type, id, cfg.reentrancy.enabled ? chain : undefined);
    } catch (e) {
      if (e instanceof StackDepthError) throw fail(ERRORS.ACTOR_INVOKE_FAILED, `error invoking actor ${type}/${id} method ${method}: ${e.message}`);
      throw e;
    }
    try {
      return await this.opts.app.invokeMethod(type, id, method, body, out);
    } catch (e) {
      throw fail(ERRORS.ACTOR_INVOKE_FAILED, `error invoking actor ${type}/${id} method ${method}: ${(e as Error).message}`);
    } finally {
      turn.release();
    }
  }

  // ------------------------------------------------------------ state

  async getState(type: string, id: string, key: string): Promise<Uint8Array | undefined> {
    checkActor(type, id);
    checkName(key, 'state key');
    const store = this.stateStore();
    await this.local(type, id, ERRORS.ACTOR_INSTANCE_MISSING);
    try {
      const item = await store.get(this.stateKey(type, id, key));
      return item && item.value.length > 0 ? item.value : undefined;
    } catch (e) {
      throw fail(ERRORS.ACTOR_STATE_GET_FAILED, `error getting actor state of ${type}/${id} key ${key}: ${(e as Error).message}`);
    }
  }

  async transact(type: string, id: string, ops: ActorStateOperation[]): Promise<void> {
    checkActor(type, id);
    const store = this.stateStore();
    const out: StateTransactionOperation[] = ops.map((o, i) => {
      checkName(o.key, `operations[${i}] key`);
      const metadata = o.metadata && Object.keys(o.metadata).length > 0 ? o.metadata : undefined;
      const key = this.stateKey(type, id, o.key);
      switch (o.operation.toLowerCase()) {
        case 'upsert':
          return { operation: 'upsert', request: { key, value: o.value ?? new Uint8Array(), metadata } };
        case 'delete':
          return { operation: 'delete', request: { key, metadata } };
        default:
          throw malformed(`operations[${i}]: operation "${o.operation.slice(0, 40)}" is not one of upsert, delete`);
      }
    });
    await this.local(type, id, ERRORS.ACTOR_INSTANCE_MISSING);
    if (out.length === 0) return;
    try {
      if (!store.transact) throw new Error('the actor state store has no transactions');
      await store.transact(out);
    } catch (e) {
      throw fail(ERRORS.ACTOR_STATE_TRANSACTION_FAILED, `error saving the actor state of ${type}/${id}: ${(e as Error).message}`);
    }
  }

  /** The reference runtime's key of an actor's state item. */
  stateKey(type: string, id: string, key: string): string {
    return `${this.opts.appId}||${type}||${id}||${key}`;
  }

  private stateStore(): StateStore {
    const s = this.opts.components.actorStateStore();
    if (!s) throw fail(ERRORS.ACTOR_RUNTIME_NOT_FOUND, 'actor state needs a state store: add a state store Component with metadata actorStateStore: "true"');
    return s.store;
  }

  // ------------------------------------------------------------ timers

  async createTimer(type: string, id: string, name: string, req: TimerRequest): Promise<void> {
    checkActor(type, id);
    checkName(name, 'timer name');
    const s = parseSchedule(req, Date.now());
    if (!s.ok) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_TIMER_CREATE', `timer ${name}: ${s.reason}`);
    await this.local(type, id, ERRORS.ACTOR_INSTANCE_MISSING);
    const act = this.table.active(type, id);
    if (!act) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_TIMER_CREATE', `cannot create timer ${name} for actor ${type}/${id}: the actor is not active (timers live with an activation; call a method first, or use a reminder)`);
    startTimer(this.table, this.opts.app, this.log, act, {
      name,
      schedule: s.value,
      payload: { data: req.data ?? null, callback: req.callback ?? '', dueTime: req.dueTime ?? '', period: req.period ?? '' },
    });
  }

  async deleteTimer(type: string, id: string, name: string): Promise<void> {
    checkActor(type, id);
    checkName(name, 'timer name');
    const act = this.table.active(type, id);
    if (act) stopTimer(act, name);
  }

  // ------------------------------------------------------------ reminders

  async createReminder(type: string, id: string, name: string, req: ScheduleRequest): Promise<void> {
    checkActor(type, id);
    checkName(name, 'reminder name');
    if (name.includes('||') || type.includes('||') || id.includes('||')) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_REMINDER_CREATE', 'actor types, ids and reminder names may not contain "||" (it separates the parts of a reminder\'s key)');
    const s = parseSchedule(req, Date.now());
    if (!s.ok) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_REMINDER_CREATE', `reminder ${name}: ${s.reason}`);
    const reminders = this.reminders('ERR_ACTOR_REMINDER_CREATE');
    const r: StoredReminder = { actorType: type, actorId: id, name, dueTime: req.dueTime ?? '', period: req.period ?? '', ttl: req.ttl ?? '', data: req.data ?? null };
    await this.scheduler('ERR_ACTOR_REMINDER_CREATE', () => reminders.create(r, s.value));
  }

  async getReminder(type: string, id: string, name: string): Promise<StoredReminder> {
    checkActor(type, id);
    checkName(name, 'reminder name');
    const reminders = this.reminders('ERR_ACTOR_REMINDER_GET');
    const r = await this.scheduler('ERR_ACTOR_REMINDER_GET', () => reminders.get(type, id, name));
    if (!r) throw fail(ERRORS.ACTOR_REMINDER_NOT_FOUND, `actor ${type}/${id} has no reminder named ${name}`);
    return r;
  }

  async deleteReminder(type: string, id: string, name: string): Promise<void> {
    checkActor(type, id);
    checkName(name, 'reminder name');
    const reminders = this.reminders('ERR_ACTOR_REMINDER_DELETE');
    await this.scheduler('ERR_ACTOR_REMINDER_DELETE', () => reminders.delete(type, id, name));
  }

  /** The reminders of a type, or of one of its actors (gRPC ListActorReminders). */
  async listReminders(type: string, id?: string): Promise<StoredReminder[]> {
    checkName(type, 'actor type');
    const reminders = this.reminders('ERR_ACTOR_REMINDER_LIST');
    return this.scheduler('ERR_ACTOR_REMINDER_LIST', () => reminders.list(type, id || undefined));
  }

  /** Deletes the reminders of a type, or of one of its actors (gRPC UnregisterActorRemindersByType). */
  async deleteRemindersOf(type: string, id?: string): Promise<void> {
    const reminders = this.reminders('ERR_ACTOR_REMINDER_DELETE');
    for (const r of await this.listReminders(type, id)) await this.scheduler('ERR_ACTOR_REMINDER_DELETE', () => reminders.delete(r.actorType, r.actorId, r.name));
  }

  /** A reminder's fire: through the actor's turn (activating it), to the app. Rejects when the app did not take it. */
  private async fireReminder(r: StoredReminder): Promise<void> {
    await Promise.race([this.typesKnown, new Promise((_, reject) => setTimeout(() => reject(new Error('the app has not said which actor types it hosts yet')), 60_000).unref())]);
    const host = this.opts.placement.lookup(r.actorType, r.actorId);
    if (!host) {
      this.log.warn({ actorType: r.actorType, actorId: r.actorId, reminder: r.name }, 'a reminder fired for an actor type no host serves: dropped');
      return;
    }
    if (!host.local) throw new Error(`reminder ${r.name} of ${r.actorType}/${r.actorId} belongs to ${host.appId} at ${host.address}: calls between hosts are not wired yet`);
    const turn = await this.table.enter(r.actorType, r.actorId, undefined);
    try {
      const res = await this.opts.app.fireReminder(r.actorType, r.actorId, r.name, { data: r.data, dueTime: r.dueTime, period: r.period });
      if (res.status >= 300) throw new Error(`the app answered reminder ${r.name} with ${res.status}`);
    } finally {
      turn.release();
    }
  }

  private reminders(code: string): ActorReminders {
    if (!this.opts.reminders) throw failAs(ERRORS.ACTOR_OPERATION_FAILED, code, 'actor reminders are jobs in the scheduler, and this sidecar has none: start it with --scheduler-host-address (rt run embeds one)');
    return this.opts.reminders;
  }

  private async scheduler<T>(code: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      if (e instanceof ApiError) throw e;
      const m = (e as Error).message;
      if ((e as { kind?: string }).kind === 'invalid') throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, code, m);
      throw failAs(ERRORS.ACTOR_OPERATION_FAILED, code, `the scheduler failed: ${m}`);
    }
  }

  // ------------------------------------------------------------ placement

  /** Waits for placement, then makes sure this host serves the actor; else the row's error. */
  private async local(type: string, id: string, row: typeof ERRORS.ACTOR_INVOKE_FAILED | typeof ERRORS.ACTOR_INSTANCE_MISSING): Promise<void> {
    await this.opts.placement.ready();
    const host = this.opts.placement.lookup(type, id);
    if (host?.local) return;
    const hosted = this.config.entities.length > 0 ? `this app hosts ${this.config.entities.join(', ')}` : 'this app hosts no actor types (its /dapr/config lists none)';
    if (!host) throw fail(row, `no host of actor type ${type} is known: ${hosted}`);
    throw fail(row, `actor ${type}/${id} is hosted by app ${host.appId} at ${host.address}; calls between sidecars are not wired yet`);
  }

  /** Shutdown: every actor ended, a call in flight waited for 5 s at most (the HTTP server's own grace). */
  async close(): Promise<void> {
    this.table.close();
    await this.table.drain(() => true, SHUTDOWN_DRAIN_MS);
    this.opts.app.abort();
  }
}

function checkActor(type: string, id: string): void {
  checkName(type, 'actor type');
  checkName(id, 'actor id');
}

function checkName(v: string, what: string): void {
  if (typeof v !== 'string' || v === '') throw malformed(`the ${what} is empty`);
  if (v.length > MAX_NAME) throw malformed(`the ${what} is ${v.length} characters long; the limit is ${MAX_NAME}`);
}

function reentrancyIdOf(headers: Record<string, string>): string | undefined {
  for (const h of REENTRANCY_HEADERS) {
    const v = headers[h];
    if (v) return v;
  }
  return undefined;
}
