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
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';
import { REENTRANCY_HEADERS, type ActorApp } from './app-calls.ts';
import { DEFAULTS, reminderPartitionsNote, type ActorsConfig, type ActorTypeConfig } from './config.ts';
import { HostUnreachable, NOT_HOSTED_HERE, type ActorPeers, type ActorStateOperation, type ScheduleRequest, type TimerRequest } from './calls.ts';
import type { ActorHost, ActorPlacement } from './placement/types.ts';
import type { ReminderOptions } from './reminder-request.ts';
import type { ActorReminders, StoredReminder } from './reminders.ts';
import { parseSchedule, type FireSchedule } from './schedule.ts';
import { ActorTable } from './table.ts';
import { startTimer, stopTimer } from './timers.ts';
import { StackDepthError, TurnTimeoutError } from './turns.ts';

export type { ActorStateOperation, ScheduleRequest, TimerRequest } from './calls.ts';

export interface ActorsServiceOptions {
  appId: string;
  log: Logger;
  components: ComponentRegistry;
  placement: ActorPlacement;
  app: ActorApp;
  /** Absent when no scheduler is configured: reminders answer so. */
  reminders?: ActorReminders;
  /** The other hosts' sidecars (with a placement service): operations of actors hosted there go to them. */
  peers?: ActorPeers;
  /** Actor state calls run under the store's outbound policy (and, tracing on, a CLIENT span), as the state API's do. */
  resiliency?: ResiliencyService;
  /** How long a call waits for placement (a table being disseminated, a host being replaced); default 30 s. */
  placementWaitMs?: number;
  /**
   * How long a method call waits for its actor's turn behind other calls; default 60 s. The
   * reference waits as long as the caller does; this bounds a cycle without reentrancy
   * (X → Y → X) when no caller has a timeout.
   */
  turnWaitMs?: number;
}

/** The actor state store: its component name (policies, spans) and the store. */
type ActorStore = { name: string; store: StateStore };

type HostRow = typeof ERRORS.ACTOR_INVOKE_FAILED | typeof ERRORS.ACTOR_INSTANCE_MISSING | typeof ERRORS.ACTOR_STATE_GET_FAILED | typeof ERRORS.ACTOR_STATE_TRANSACTION_FAILED;
/** A host that cannot be reached, or that does not host the actor yet, is tried again this often until the table changes. */
const RETRY_MS = 200;

const MAX_NAME = 1024;
const SHUTDOWN_DRAIN_MS = 5000;
const TURN_WAIT_MS = 60_000;
/** How long a stopping host waits for the table without it (a placement round: lock, update, unlock). */
const LEAVE_WAIT_MS = 5000;

export class ActorsService {
  private readonly opts: ActorsServiceOptions;
  private readonly log: Logger;
  private config: ActorsConfig = { entities: [], scanIntervalMs: DEFAULTS.scanIntervalMs, types: new Map(), ignored: [] };
  readonly table: ActorTable;
  private configured!: () => void;
  private readonly waitMs: number;
  private leaving?: Promise<void>;
  /** Settles once the app's actor types are known (reminders that fire early wait for it). */
  readonly typesKnown = new Promise<void>((r) => (this.configured = r));

  constructor(opts: ActorsServiceOptions) {
    this.opts = opts;
    this.log = opts.log;
    this.waitMs = opts.placementWaitMs ?? 30_000;
    this.table = new ActorTable(opts.app, opts.log, (t) => this.configOf(t));
    opts.reminders?.onFire((r) => this.fireReminder(r));
    // a new table: the actors that moved to another host end here; the idle ones before it is
    // acknowledged (onTable), so that their new host gets no call while they are active here
    const moved = (act: { type: string; id: string }) => !opts.placement.lookup(act.type, act.id)?.local;
    opts.placement.onTable?.(() => this.table.drainIdle(moved));
    opts.placement.onChange(() => void this.table.drain(moved));
  }

  /** The app's actor settings (from its config discovery): placement learns the hosted types. */
  configure(config: ActorsConfig): void {
    this.config = config;
    const partitions = reminderPartitionsNote(config);
    if (partitions) this.log.debug(partitions);
    this.opts.placement.setHostedTypes(this.leaving ? [] : config.entities);
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
   * (status, content type, body), as the reference passes it on; from the host's sidecar when that
   * is another. `forwarded`: another sidecar sent it here (it is not sent on again).
   */
  async invoke(type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>, forwarded = false): Promise<AppResponse> {
    checkActor(type, id);
    if (method === '') throw malformed('the actor method is empty: call /v1.0/actors/<type>/<id>/method/<method>');
    return this.at(type, id, ERRORS.ACTOR_INVOKE_FAILED, forwarded, () => this.invokeHere(type, id, method, body, headers), (peers, host) => peers.invoke(host, type, id, method, body, headers));
  }

  private async invokeHere(type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>): Promise<AppResponse> {
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
      turn = await this.table.enter(type, id, cfg.reentrancy.enabled ? chain : undefined, this.opts.turnWaitMs ?? TURN_WAIT_MS);
    } catch (e) {
      if (e instanceof StackDepthError) throw fail(ERRORS.ACTOR_STACK_DEPTH, e.message);
      if (e instanceof TurnTimeoutError) throw fail(ERRORS.ACTOR_INVOKE_FAILED, `error invoking actor ${type}/${id} method ${method}: ${e.message}`);
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

  async getState(type: string, id: string, key: string, forwarded = false): Promise<Uint8Array | undefined> {
    checkActor(type, id);
    checkName(key, 'state key');
    const store = this.stateStore();
    return this.at(type, id, ERRORS.ACTOR_INSTANCE_MISSING, forwarded, () => this.getStateHere(store, type, id, key), (peers, host) => peers.getState(host, type, id, key));
  }

  private async getStateHere(s: ActorStore, type: string, id: string, key: string): Promise<Uint8Array | undefined> {
    try {
      const item = await this.storeCall(s, () => s.store.get(this.stateKey(type, id, key)));
      return item && item.value.length > 0 ? item.value : undefined;
    } catch (e) {
      throw fail(ERRORS.ACTOR_STATE_GET_FAILED, `error getting actor state of ${type}/${id} key ${key}: ${(e as Error).message}`);
    }
  }

  async transact(type: string, id: string, ops: ActorStateOperation[], forwarded = false): Promise<void> {
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
    await this.at(type, id, ERRORS.ACTOR_INSTANCE_MISSING, forwarded, () => this.transactHere(store, type, id, out), (peers, host) => peers.transact(host, type, id, ops));
  }

  private async transactHere(s: ActorStore, type: string, id: string, out: StateTransactionOperation[]): Promise<void> {
    if (out.length === 0) return;
    try {
      const { store } = s;
      if (!store.transact) throw new Error('the actor state store has no transactions');
      await this.storeCall(s, () => store.transact!(out));
    } catch (e) {
      throw fail(ERRORS.ACTOR_STATE_TRANSACTION_FAILED, `error saving the actor state of ${type}/${id}: ${(e as Error).message}`);
    }
  }

  /** The reference runtime's key of an actor's state item. */
  stateKey(type: string, id: string, key: string): string {
    return `${this.opts.appId}||${type}||${id}||${key}`;
  }

  private stateStore(): ActorStore {
    const s = this.opts.components.actorStateStore();
    if (!s) throw fail(ERRORS.ACTOR_RUNTIME_NOT_FOUND, 'actor state needs a state store: add a state store Component with metadata actorStateStore: "true"');
    return s;
  }

  /** A call to the actor state store, under its outbound policy when one applies. */
  private storeCall<T>(s: ActorStore, call: () => Promise<T>): Promise<T> {
    return componentCall(this.opts.resiliency, this.opts.components, s.name, 'Outbound', call);
  }

  // ------------------------------------------------------------ timers

  async createTimer(type: string, id: string, name: string, req: TimerRequest, forwarded = false): Promise<void> {
    checkActor(type, id);
    checkName(name, 'timer name');
    const s = parseSchedule(req, Date.now());
    if (!s.ok) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_TIMER_CREATE', `timer ${name}: ${s.reason}`);
    const schedule = s.value;
    await this.at(type, id, ERRORS.ACTOR_INSTANCE_MISSING, forwarded, async () => this.createTimerHere(type, id, name, req, schedule), (peers, host) => peers.createTimer(host, type, id, name, req));
  }

  private createTimerHere(type: string, id: string, name: string, req: TimerRequest, schedule: FireSchedule): void {
    const act = this.table.active(type, id);
    if (!act) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_TIMER_CREATE', `cannot create timer ${name} for actor ${type}/${id}: the actor is not active (timers live with an activation; call a method first, or use a reminder)`);
    startTimer(this.table, this.opts.app, this.log, act, {
      name,
      schedule,
      payload: { data: req.data ?? null, callback: req.callback ?? '', dueTime: req.dueTime ?? '', period: req.period ?? '' },
    });
  }

  async deleteTimer(type: string, id: string, name: string, forwarded = false): Promise<void> {
    checkActor(type, id);
    checkName(name, 'timer name');
    const here = async () => {
      const act = this.table.active(type, id);
      if (act) stopTimer(act, name);
    };
    // timers live with the activation: without other hosts it can only be here
    if (!this.opts.peers || forwarded) return here();
    await this.at(type, id, ERRORS.ACTOR_INSTANCE_MISSING, forwarded, here, (peers, host) => peers.deleteTimer(host, type, id, name));
  }

  // ------------------------------------------------------------ reminders

  async createReminder(type: string, id: string, name: string, req: ScheduleRequest & ReminderOptions): Promise<void> {
    checkActor(type, id);
    checkName(name, 'reminder name');
    if (name.includes('||') || type.includes('||') || id.includes('||')) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_REMINDER_CREATE', 'actor types, ids and reminder names may not contain "||" (it separates the parts of a reminder\'s key)');
    const s = parseSchedule(req, Date.now());
    if (!s.ok) throw failAs(ERRORS.ACTOR_SCHEDULE_INVALID, 'ERR_ACTOR_REMINDER_CREATE', `reminder ${name}: ${s.reason}`);
    const reminders = this.reminders('ERR_ACTOR_REMINDER_CREATE');
    const r: StoredReminder = { actorType: type, actorId: id, name, dueTime: req.dueTime ?? '', period: req.period ?? '', ttl: req.ttl ?? '', data: req.data ?? null };
    await this.scheduler('ERR_ACTOR_REMINDER_CREATE', () => reminders.create(r, s.value, req));
  }

  async getReminder(type: string, id: string, name: string): Promise<StoredReminder> {
    checkActor(type, id);
    checkName(name, 'reminder name');
    const reminders = this.reminders('ERR_ACTOR_REMINDER_GET');
    const r = await this.scheduler('ERR_ACTOR_REMINDER_GET', () => reminders.get(type, id, name));
    if (!r) throw fail(ERRORS.ACTOR_REMINDER_NOT_FOUND, `actor reminder not found: ${name}`); // the reference's message
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

  /**
   * A reminder's fire: at the actor's host (this sidecar's scheduler stream may get fires of
   * actors hosted elsewhere), through the actor's turn (activating it), to the app. Rejects when
   * the app did not take it, and the scheduler fires it again.
   */
  async fireReminder(r: StoredReminder, forwarded = false): Promise<void> {
    await Promise.race([this.typesKnown, new Promise((_, reject) => setTimeout(() => reject(new Error('the app has not said which actor types it hosts yet')), 60_000).unref())]);
    await this.placementReady(Date.now() + this.waitMs, ERRORS.ACTOR_INVOKE_FAILED);
    if (!this.opts.placement.lookup(r.actorType, r.actorId)) {
      this.log.warn({ actorType: r.actorType, actorId: r.actorId, reminder: r.name }, 'a reminder fired for an actor type no host serves: dropped');
      return;
    }
    await this.at(r.actorType, r.actorId, ERRORS.ACTOR_INVOKE_FAILED, forwarded, () => this.fireReminderHere(r), (peers, host) => peers.fireReminder(host, r));
  }

  private async fireReminderHere(r: StoredReminder): Promise<void> {
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

  /**
   * Runs an operation where the actor is served: `here` when this sidecar hosts it, else `there`
   * at its host's sidecar. Waits for placement (a table being disseminated) and, when the host
   * cannot be reached or does not host the actor by its own table, for the table to change, up to
   * the deadline; past it, or with no host known, the row's error.
   */
  private async at<T>(type: string, id: string, row: HostRow, forwarded: boolean, here: () => Promise<T>, there: (peers: ActorPeers, host: ActorHost) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.waitMs;
    for (;;) {
      await this.placementReady(deadline, row);
      const host = this.opts.placement.lookup(type, id);
      if (host?.local) return here();
      if (!host) {
        const hosted = this.config.entities.length > 0 ? `this app hosts ${this.config.entities.join(', ')}` : 'this app hosts no actor types (its /dapr/config lists none)';
        throw fail(row, `no host of actor type ${type} is known: ${hosted}`);
      }
      let why: string;
      if (forwarded) {
        // the caller's table says this sidecar, ours another: the caller waits for the tables to agree
        throw new ApiError(409, NOT_HOSTED_HERE, `actor ${type}/${id} is hosted by app ${host.appId} at ${host.address} by the table of the sidecar of ${this.opts.appId}`);
      }
      if (!this.opts.peers) throw fail(row, `actor ${type}/${id} is hosted by app ${host.appId} at ${host.address}, and this sidecar has no internal invocation port to reach it`);
      try {
        return await there(this.opts.peers, host);
      } catch (e) {
        if (e instanceof ApiError && e.errorCode !== NOT_HOSTED_HERE) throw e; // the host's own answer
        if (!(e instanceof HostUnreachable) && !(e instanceof ApiError)) throw fail(row, `actor ${type}/${id}: the call to its host, app ${host.appId} at ${host.address}, broke off: ${(e as Error).message}`);
        why = e.message;
      }
      if (Date.now() >= deadline) throw fail(row, `actor ${type}/${id} could not be reached within ${this.waitMs} ms: ${why}`);
      await this.tableChange(deadline);
    }
  }

  /** Waits while placement holds lookups (a table being disseminated), up to the deadline. */
  private async placementReady(deadline: number, row: HostRow): Promise<void> {
    const placement = this.opts.placement;
    if (!placement.locked) return;
    try {
      await placement.ready(AbortSignal.timeout(Math.max(1, deadline - Date.now())));
    } catch (e) {
      const why = (e as Error).name === 'TimeoutError' ? `the actor placement table was not ready within ${this.waitMs} ms (is the placement service reachable? see --placement-host-address)` : `actor placement: ${(e as Error).message}`;
      throw fail(row, why);
    }
  }

  /** Resolves when the table changes, after RETRY_MS, or at the deadline, whichever comes first. */
  private tableChange(deadline: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        off();
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(RETRY_MS, deadline - Date.now())));
      const off = this.opts.placement.onChange(done);
    });
  }

  /**
   * The first step of a shutdown, as the reference's: with other hosts, this one tells placement
   * it hosts no types, so the next table gives its actors to the others and new calls go there
   * (this sidecar forwards the ones it still gets); each actor here ends once its call in
   * flight is over (drainOngoingCallTimeout, the table-change drain). Resolves once that table
   * came, or after LEAVE_WAIT_MS. Standalone there is nowhere else: nothing to leave.
   */
  leave(): Promise<void> {
    if (this.leaving) return this.leaving;
    if (!this.opts.peers || this.config.entities.length === 0) return (this.leaving = Promise.resolve());
    const placement = this.opts.placement;
    this.leaving = new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        off();
        resolve();
      };
      const timer = setTimeout(done, LEAVE_WAIT_MS);
      // the table without this host: none of its types has a local actor
      const off = placement.onChange(() => {
        if (this.config.entities.every((t) => !placement.lookup(t, '')?.local)) done();
      });
      placement.setHostedTypes([]);
    });
    return this.leaving;
  }

  /**
   * Shutdown: placement left first (leave()), then every actor still here ended, a call in
   * flight waited for its type's drainOngoingCallTimeout (when drainRebalancedActors), 5 s at most.
   */
  async close(): Promise<void> {
    this.table.close();
    await this.leave();
    let timer: NodeJS.Timeout | undefined;
    // the table-change drain waits drainOngoingCallTimeout; a shutdown no more than SHUTDOWN_DRAIN_MS
    await Promise.race([this.table.drain(() => true, SHUTDOWN_DRAIN_MS), new Promise((r) => (timer = setTimeout(r, SHUTDOWN_DRAIN_MS)))]);
    clearTimeout(timer);
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
