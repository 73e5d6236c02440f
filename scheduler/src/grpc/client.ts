/**
 * The sidecar's gRPC client to one or more scheduler hosts. Calls go to one host (the next
 * one when it is unavailable); a WatchJobs stream is kept open to every host, since each
 * host delivers the triggers of the jobs it owns. Streams reconnect with backoff.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { Backoff, wait } from '../../../shared/backoff.ts';
import { systemClock, type Clock, type Timer } from '../../../shared/clock.ts';
import { CLOSE_DRAIN_MS, settle, type SchedulerClient, type TriggerHandler } from '../client.ts';
import { SchedulerError, type JobKey, type JobOwnerRef, type JobRecord, type JobSpec, type Target } from '../types.ts';
import { TOKEN_METADATA, fromPbRecord, fromPbTrigger, fromServiceError, schedulerService, toPbJob, type PbRecord, type PbTrigger } from './proto.ts';

type Unary = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, res: unknown) => void) => void;

interface Host {
  address: string;
  client: grpc.Client & Record<string, unknown>;
  connected: boolean;
  stream?: grpc.ClientDuplexStream<unknown, unknown>;
  retry?: Timer;
  /** Waits between attempts to reopen its stream. */
  backoff: Backoff;
  /** Said once per outage that this scheduler does not answer. */
  saidUnreachable?: boolean;
  /** A stream to it has failed before: later ones wait for the channel to be ready. */
  retried?: boolean;
}

const CALL_TIMEOUT_MS = 10_000;
/** Waits between attempts to reopen a stream that failed on a connected channel: 100 ms doubling to 500 ms. */
const STREAM_BACKOFF = { initialMs: 100, maxMs: 500 };
/**
 * Longest wait between the channel's reconnects (grpc-js adds up to 20% jitter). A lost stream
 * waits for the channel, so a scheduler that comes back gets its sidecars back within this.
 */
const CHANNEL_MAX_BACKOFF_MS = 300;
/** How long calls keep trying when no scheduler host is reachable. */
const UNAVAILABLE_RETRY_MS = 3_000;

export class GrpcSchedulerClient implements SchedulerClient {
  private readonly hosts: Host[];
  private readonly log: Logger;
  private readonly token?: string;
  private readonly clock: Clock;
  private next = 0;
  private closed = false;
  /** Triggers being handled; a graceful close lets them finish and acks them first. */
  private active = 0;
  private draining = false;

  /**
   * `token`: the scheduler's token (env RT_SCHEDULER_TOKEN), sent on every call.
   * `tlsCa`: PEM CA that signed the scheduler's certificate: connect over TLS and verify it.
   * `credentials`: the channel's credentials instead (mTLS: the sidecar's workload certificate,
   * which follows its rotation; sidecar/src/identity/tls.ts).
   * `clock`: the time of its stream backoff and call retries (the system's; grpc-js's channel
   * reconnects keep their own timers).
   */
  constructor(addresses: string[], opts: { log: Logger; token?: string; tlsCa?: Buffer; credentials?: grpc.ChannelCredentials; clock?: Clock }) {
    this.log = opts.log;
    this.token = opts.token;
    this.clock = opts.clock ?? systemClock({ keepAlive: true });
    const Ctor = schedulerService();
    const credentials = opts.credentials ?? (opts.tlsCa ? grpc.credentials.createSsl(opts.tlsCa) : grpc.credentials.createInsecure());
    this.hosts = addresses.map((address) => ({
      address,
      client: new Ctor(address, credentials, {
        'grpc.keepalive_time_ms': 10_000,
        'grpc.keepalive_timeout_ms': 5_000,
        'grpc.keepalive_permit_without_calls': 1,
        'grpc.max_receive_message_length': 64 * 1024 * 1024,
        // fail fast to the next host instead of waiting out a dead one's reconnect
        // and find a scheduler that came back within a second
        'grpc.initial_reconnect_backoff_ms': 200,
        'grpc.max_reconnect_backoff_ms': CHANNEL_MAX_BACKOFF_MS,
      }) as unknown as Host['client'],
      connected: false,
      backoff: new Backoff(STREAM_BACKOFF),
    }));
  }

  connectedAddresses(): string[] {
    return this.hosts.filter((h) => h.connected).map((h) => h.address);
  }

  async schedule(key: JobKey, spec: JobSpec, overwrite: boolean): Promise<void> {
    // one id for the call and all its retries (see ScheduleJobRequest.request_id)
    await this.call('ScheduleJob', { key, job: toPbJob(spec), overwrite, requestId: randomUUID() }, 'RT_SCHEDULER_SCHEDULE_JOB');
  }

  async get(key: JobKey): Promise<JobRecord> {
    const res = (await this.call('GetJob', { key }, 'RT_SCHEDULER_GET_JOB')) as { job?: PbRecord };
    if (!res.job) throw new SchedulerError('not_found', 'RT_SCHEDULER_GET_JOB', `job "${key.name}" not found`);
    return fromPbRecord(res.job);
  }

  async delete(key: JobKey): Promise<void> {
    await this.call('DeleteJob', { key }, 'RT_SCHEDULER_DELETE_JOB');
  }

  async list(ref: JobOwnerRef): Promise<JobRecord[]> {
    const res = (await this.call('ListJobs', ref, 'RT_SCHEDULER_LIST_JOBS')) as { jobs?: PbRecord[] };
    return (res.jobs ?? []).map(fromPbRecord);
  }

  /**
   * Tries hosts in turn (connected ones first); only "unavailable" moves to the next. When
   * none answers, tries again for a short while: a scheduler that is restarting (or a channel
   * still in reconnect backoff) is back within a few seconds.
   */
  private async call(method: string, req: unknown, code: string): Promise<unknown> {
    const giveUpAt = this.clock.now() + UNAVAILABLE_RETRY_MS;
    let last: grpc.ServiceError | undefined;
    for (;;) {
      for (const h of this.order()) {
        try {
          return await new Promise((resolve, reject) =>
            (h.client[method] as Unary).call(h.client, req, this.metadata(), { deadline: Date.now() + CALL_TIMEOUT_MS }, (e, res) => (e ? reject(e) : resolve(res))),
          );
        } catch (e) {
          const se = e as grpc.ServiceError;
          if (se.code !== grpc.status.UNAVAILABLE && se.code !== grpc.status.DEADLINE_EXCEEDED) throw fromServiceError(se, code);
          last = se;
        }
      }
      if (this.closed || this.clock.now() >= giveUpAt) break;
      await wait(200, { clock: this.clock });
    }
    throw new SchedulerError('unavailable', code, `no scheduler host answered (${this.hosts.map((h) => h.address).join(', ')}): ${last?.details || last?.message || 'unavailable'}`);
  }

  private metadata(waitForReady = false): grpc.Metadata {
    const md = new grpc.Metadata({ waitForReady });
    if (this.token) md.set(TOKEN_METADATA, this.token);
    return md;
  }

  private order(): Host[] {
    const start = this.next++ % this.hosts.length;
    const rotated = [...this.hosts.slice(start), ...this.hosts.slice(0, start)];
    return [...rotated.filter((h) => h.connected), ...rotated.filter((h) => !h.connected)];
  }

  watch(target: Target, handler: TriggerHandler, opts: { appJobs?: boolean } = {}): void {
    const appJobs = opts.appJobs ?? true;
    for (const h of this.hosts) this.openStream(h, target, handler, appJobs);
  }

  private openStream(h: Host, target: Target, handler: TriggerHandler, appJobs: boolean): void {
    if (this.closed) return;
    // The first attempt fails fast, so an absent scheduler is said at once. Later attempts wait
    // for the channel: the stream opens the moment its reconnect succeeds, not at our next timer.
    const stream = (h.client.WatchJobs as (md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientDuplexStream<unknown, unknown>).call(h.client, this.metadata(h.retried), {});
    h.stream = stream;
    let dead = false;
    // acks settled in one turn of the event loop go back as one message
    let acks: { id: string; success: boolean }[] = [];
    const flushAcks = () => {
      const out = acks;
      acks = [];
      // an ack on a dead stream is lost; the host re-sends the trigger to a live one
      if (!dead && out.length > 0) stream.write({ acks: out });
    };
    stream.on('data', (msg: { ready?: object; triggers?: PbTrigger[] }) => {
      if (msg.ready) {
        h.connected = true;
        h.backoff.reset();
        h.saidUnreachable = false;
        this.log.info({ scheduler: h.address }, 'connected to scheduler');
      }
      for (const pb of msg.triggers ?? []) {
        // closing: leave it un-acked; the scheduler gives it to another sidecar
        if (this.draining) continue;
        const t = fromPbTrigger(pb);
        this.active++;
        handler(t)
          .catch(() => false)
          .then((ok) => {
            this.active--;
            if (acks.length === 0) setImmediate(flushAcks);
            acks.push({ id: t.id, success: ok });
          });
      }
    });
    const down = (why: string) => {
      if (dead) return;
      dead = true;
      if (h.connected) this.log.warn({ scheduler: h.address, why }, 'lost the scheduler stream; reconnecting');
      else if (!h.saidUnreachable && !this.closed) {
        h.saidUnreachable = true;
        this.log.warn({ scheduler: h.address, why }, `the scheduler at ${h.address} does not answer; jobs and workflow timers wait until it does (retrying). Check --scheduler-host-address, or start one with: rt scheduler`);
      }
      h.connected = false;
      h.stream = undefined;
      if (this.closed) return;
      h.retried = true;
      h.retry = this.clock.after(h.backoff.next(), () => this.openStream(h, target, handler, appJobs));
    };
    stream.on('error', (e: Error) => down(e.message));
    stream.on('end', () => down('stream ended'));
    stream.on('close', () => down('stream closed'));
    stream.write({ hello: { namespace: target.namespace, appId: target.appId, internalOnly: !appJobs } });
  }

  async close(): Promise<void> {
    this.draining = true;
    await settle(() => this.active === 0, CLOSE_DRAIN_MS);
    await new Promise((r) => setImmediate(r)); // the last acks go out
    await new Promise((r) => setImmediate(r));
    this.closed = true;
    for (const h of this.hosts) {
      h.retry?.cancel();
      h.stream?.cancel();
      h.connected = false;
      h.client.close();
    }
  }
}
