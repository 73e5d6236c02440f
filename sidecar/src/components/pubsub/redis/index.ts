/**
 * pubsub.redis: Redis Streams. A topic is a stream; publish is XADD (MAXLEN ~ maxLenApprox when
 * set). Each app is a consumer group (consumerID, default the app id) and each sidecar one
 * consumer in it (a name of its own per process), so replicas of one app share the messages.
 * A message is acknowledged (XACK) only when the handler succeeds; one that stays pending longer
 * than processingTimeout — its replica died, or the app never took it — is claimed (XAUTOCLAIM)
 * by whichever replica looks next, every redeliverInterval: at-least-once.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { decodeMetadata, defineMetadata, type Decoded } from '../../metadata/decode.ts';
import { redisOptions } from '../../state/redis/index.ts';
import type { ComponentContext, ComponentFactory, ComponentSpec } from '../../types.ts';
import type { BulkPublishEntry, MessageHandler, PubSub, TopicSubscription } from '../types.ts';
import { METADATA, STREAM } from './metadata.ts';

export interface StreamSettings {
  consumerGroup: string;
  processingTimeoutMs: number;
  redeliverIntervalMs: number;
  /** messages handled at once per topic. */
  concurrency: number;
  maxLenApprox?: number;
}

const STREAM_ONLY = defineMetadata('pubsub.redis', STREAM);

function settingsOf(m: Decoded<typeof STREAM>, appId: string): StreamSettings {
  return {
    consumerGroup: m.consumerID ?? appId,
    processingTimeoutMs: m.processingTimeout,
    redeliverIntervalMs: m.redeliverInterval,
    concurrency: m.concurrency,
    maxLenApprox: m.maxLenApprox,
  };
}

/** The stream settings of a component's metadata (its connection fields not checked). */
export function streamSettings(md: Record<string, string>, appId: string): StreamSettings {
  return settingsOf(decodeMetadata(STREAM_ONLY, md), appId);
}

type Entry = [id: Buffer, fields: Buffer[] | null];

/** Longest a reader waits for half its slots to free before reading into fewer. */
const REFILL_WAIT_MS = 2;

/**
 * XADD of many entries to one stream in one command: a reply of one small array instead of one
 * id per entry, and one command object in the client instead of one each (per-entry command
 * building and reply decoding were most of the client's cost per message). Each entry is
 * added on its own (pcall): one that fails does not stop the others, and its error comes back.
 * ARGV[1]: maxLen ('' for none). ARGV[2]: the entries packed into one string (`packEntries`): per
 * entry a line "<data bytes> <contentType bytes> <metadata bytes>\n", then those values; a
 * length of 0 leaves contentType or metadata out. One argument instead of five per entry: the
 * client's encoding of each argument cost more than Redis' splitting of them.
 * Returns {index, error, ...} for the entries that failed (1-based), empty when all were added.
 */
const XADD_MANY = `
if redis.replicate_commands then redis.replicate_commands() end
local failed = {}
local maxlen = ARGV[1]
local blob = ARGV[2]
local pos, n = 1, 0
while pos <= #blob do
  local nl = string.find(blob, '\\n', pos, true)
  local dl, cl, ml = string.match(string.sub(blob, pos, nl - 1), '^(%d+) (%d+) (%d+)$')
  dl, cl, ml = tonumber(dl), tonumber(cl), tonumber(ml)
  pos = nl + 1
  local cmd = {'XADD', KEYS[1]}
  if maxlen ~= '' then cmd[3] = 'MAXLEN'; cmd[4] = '~'; cmd[5] = maxlen end
  cmd[#cmd + 1] = '*'
  cmd[#cmd + 1] = 'data'
  cmd[#cmd + 1] = string.sub(blob, pos, pos + dl - 1)
  pos = pos + dl
  if cl > 0 then cmd[#cmd + 1] = 'contentType'; cmd[#cmd + 1] = string.sub(blob, pos, pos + cl - 1); pos = pos + cl end
  if ml > 0 then cmd[#cmd + 1] = 'metadata'; cmd[#cmd + 1] = string.sub(blob, pos, pos + ml - 1); pos = pos + ml end
  n = n + 1
  local r = redis.pcall(unpack(cmd))
  if type(r) == 'table' and r.err then failed[#failed + 1] = n; failed[#failed + 1] = r.err end
end
return failed`;

/** The entries as XADD_MANY's ARGV[2]: one buffer written in place, no argument per value. */
function packEntries(list: PendingAdd[]): Buffer {
  let size = 0;
  let lastCt: string | undefined;
  let lastCtBytes = 0;
  const ctBytes = new Array<number>(list.length);
  const mdBytes = new Array<number>(list.length);
  for (let i = 0; i < list.length; i++) {
    const a = list[i];
    // the entries of one stream nearly always share their content type: measured once
    if (a.contentType !== lastCt) {
      lastCt = a.contentType;
      lastCtBytes = lastCt === undefined ? 0 : Buffer.byteLength(lastCt);
    }
    ctBytes[i] = lastCtBytes;
    mdBytes[i] = a.metadata === undefined ? 0 : Buffer.byteLength(a.metadata);
    size += 3 * 11 + a.data.length + ctBytes[i] + mdBytes[i]; // a header line is at most 3 × (10 digits + separator)
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < list.length; i++) {
    const a = list[i];
    at += out.write(`${a.data.length} ${ctBytes[i]} ${mdBytes[i]}\n`, at, 'latin1');
    out.set(a.data, at);
    at += a.data.length;
    if (a.contentType !== undefined) at += out.write(a.contentType, at, 'utf8');
    if (a.metadata !== undefined) at += out.write(a.metadata, at, 'utf8');
  }
  return out.subarray(0, at);
}

/**
 * A Redis that does not run scripts for this user (an ACL without @scripting, a managed service
 * that disables EVAL): the batcher falls back to one XADD each, pipelined.
 */
const SCRIPTS_REFUSED = /NOPERM|unknown command|disabled|not allowed/i;

/** Entries per XADD_MANY call: bounds how long one script holds Redis. */
const XADD_MANY_MAX = 1000;

type ScriptClient = Redis & { rtXaddMany(topic: string, ...args: (string | Buffer)[]): Promise<(number | string)[]> };

/** One entry to add: its stream fields (see `fieldsOf`), and which publish call waits for it. */
interface PendingAdd {
  data: Buffer;
  contentType: string | undefined;
  /** metadata as JSON; undefined when there is none. */
  metadata: string | undefined;
  call: AddCall;
  /** position in the call's entries. */
  index: number;
}

/**
 * One publish (one entry) or bulk publish (many): a single promise for all its entries, so a
 * bulk publish of 100 costs one promise, not 100. Settles when every entry has; `errors[i]` is
 * entry i's failure.
 */
class AddCall {
  readonly errors: (Error | undefined)[];
  private remaining: number;
  private readonly resolve: (errors: (Error | undefined)[]) => void;

  constructor(count: number, resolve: (errors: (Error | undefined)[]) => void) {
    this.errors = new Array<Error | undefined>(count);
    this.remaining = count;
    this.resolve = resolve;
  }

  settle(index: number, error?: Error): void {
    if (error) this.errors[index] = error;
    if (--this.remaining === 0) this.resolve(this.errors);
  }
}

/**
 * Writes gathered over one turn of the event loop go to Redis together: under load many
 * publish requests (XADD) and finished deliveries (XACK) arrive in the same turn, and one write
 * with one reply read costs far less than one each (ioredis' auto-pipelining only gathers within
 * one tick, i.e. one request). XADDs to one stream become one XADD_MANY script call; XACKs of
 * one stream and group one XACK with many ids.
 */
class WriteBatcher {
  private adds = new Map<string, PendingAdd[]>();
  private acks = new Map<AckTarget, string[]>();
  private scheduled = false;
  private scriptsRefused = false;
  private readonly client: () => ScriptClient;
  private readonly maxLen: () => string;
  private readonly onAckError: (e: Error) => void;

  constructor(client: () => ScriptClient, maxLen: () => string, onAckError: (e: Error) => void) {
    this.client = client;
    this.maxLen = maxLen;
    this.onAckError = onAckError;
  }

  /** Adds the entries to the stream; resolves with each one's error (undefined: added). */
  xadd(topic: string, entries: { data: Uint8Array; contentType?: string; metadata?: Record<string, string> }[]): Promise<(Error | undefined)[]> {
    return new Promise((resolve) => {
      const call = new AddCall(entries.length, resolve);
      let list = this.adds.get(topic);
      if (!list) this.adds.set(topic, (list = []));
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i];
        const data = Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength);
        list.push({ data, contentType: e.contentType || undefined, metadata: e.metadata && !isEmpty(e.metadata) ? JSON.stringify(e.metadata) : undefined, call, index: i });
      }
      if (entries.length === 0) resolve([]);
      this.schedule();
    });
  }

  /** Fire and forget: an ack that is lost leaves the message pending, to be delivered again. */
  xack(target: AckTarget, id: string): void {
    const ids = this.acks.get(target);
    if (ids) ids.push(id);
    else this.acks.set(target, [id]);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const adds = this.adds;
    const acks = this.acks;
    this.adds = new Map();
    this.acks = new Map();
    let client: ScriptClient;
    try {
      client = this.client();
    } catch (e) {
      for (const list of adds.values()) for (const a of list) a.call.settle(a.index, e as Error);
      return;
    }
    // the script calls and the acks in one pipeline: one socket write per turn (on loopback each
    // write also pays Redis' side of the TCP work)
    const pipe = client.pipeline() as ReturnType<ScriptClient['pipeline']> & { rtXaddMany(topic: string, maxLen: string, packed: Buffer): unknown };
    const scripted: [topic: string, list: PendingAdd[]][] = [];
    for (const [topic, list] of adds) {
      for (let start = 0; start < list.length; start += XADD_MANY_MAX) {
        const part = list.length <= XADD_MANY_MAX ? list : list.slice(start, start + XADD_MANY_MAX);
        if (this.scriptsRefused) this.addEach(client, topic, part);
        else {
          pipe.rtXaddMany(topic, this.maxLen(), packEntries(part));
          scripted.push([topic, part]);
        }
      }
    }
    for (const [a, ids] of acks) pipe.call('XACK', a.topic, a.group, ...ids);
    if (pipe.length === 0) return;
    pipe.exec().then(
      (results) => {
        results ??= [];
        scripted.forEach(([topic, list], i) => this.added(client, topic, list, results[i]?.[0] ?? undefined, results[i]?.[1]));
        for (let i = scripted.length; i < results.length; i++) if (results[i][0]) this.onAckError(results[i][0]!);
      },
      (e: Error) => {
        for (const [topic, list] of scripted) this.added(client, topic, list, e, undefined);
        if (acks.size > 0) this.onAckError(e);
      },
    );
  }

  /** Settles the entries of one XADD_MANY call from its reply: `failed` lists {index, error, ...}. */
  private added(client: ScriptClient, topic: string, list: PendingAdd[], error: Error | undefined, failed: unknown): void {
    if (error) {
      if (SCRIPTS_REFUSED.test(error.message)) {
        this.scriptsRefused = true;
        return this.addEach(client, topic, list);
      }
      for (const a of list) a.call.settle(a.index, error);
      return;
    }
    const errors = new Map<number, string>();
    if (Array.isArray(failed)) for (let i = 0; i + 1 < failed.length; i += 2) errors.set(Number(failed[i]) - 1, String(failed[i + 1]));
    for (let i = 0; i < list.length; i++) {
      const err = errors.size === 0 ? undefined : errors.get(i);
      list[i].call.settle(list[i].index, err === undefined ? undefined : new Error(err));
    }
  }

  /** One XADD per entry in one pipeline: for a Redis that refuses scripts. */
  private addEach(client: ScriptClient, topic: string, list: PendingAdd[]): void {
    const maxLen = this.maxLen();
    const trim = maxLen ? ['MAXLEN', '~', maxLen] : [];
    const pipe = client.pipeline();
    for (const a of list) pipe.call('XADD', topic, ...trim, '*', ...fieldsOf(a));
    pipe.exec().then(
      (results) => list.forEach((a, i) => a.call.settle(a.index, results?.[i]?.[0] ?? undefined)),
      (e: Error) => list.forEach((a) => a.call.settle(a.index, e)),
    );
  }
}

class RedisStreamsPubSub implements PubSub {
  private client?: ScriptClient;
  private settings!: StreamSettings;
  private log!: Logger;
  private readonly consumer = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly readers = new Set<TopicReader>();
  private readonly writes = new WriteBatcher(
    () => this.redis(),
    () => (this.settings.maxLenApprox ? String(this.settings.maxLenApprox) : ''),
    // after close() the lost acks only mean redelivery, which the next consumer handles
    (e) => this.client && this.log.warn(`acknowledging messages: ${e.message}`),
  );

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    // writes are gathered per turn here (WriteBatcher), reads are one command each: ioredis'
    // auto-pipelining would only add a pipeline object per command
    const md = decodeMetadata(METADATA, spec.metadata);
    const opts = { ...redisOptions(md), enableAutoPipelining: false };
    this.settings = settingsOf(md, ctx.appId);
    this.log = ctx.log.child({ component: spec.name });
    const { Redis } = await import('ioredis');
    const client = new Redis(opts) as ScriptClient;
    client.on('error', () => undefined);
    client.defineCommand('rtXaddMany', { numberOfKeys: 1, lua: XADD_MANY });
    this.client = client;
    await client.connect();
    await client.ping();
  }

  capabilities(): string[] {
    return [];
  }

  features(): string[] {
    return [];
  }

  async ping(): Promise<void> {
    await this.redis().ping();
  }

  async publish(topic: string, data: Uint8Array, metadata: Record<string, string> = {}, contentType?: string): Promise<void> {
    const [error] = await this.writes.xadd(topic, [{ data, contentType, metadata }]);
    if (error) throw error;
  }

  /** All entries in the same script call; each one's failure is its own. */
  async bulkPublish(topic: string, entries: BulkPublishEntry[]): Promise<{ entryId: string; error: string }[]> {
    const errors = await this.writes.xadd(
      topic,
      entries.map((e) => ({ data: e.event, contentType: e.contentType, metadata: e.metadata })),
    );
    const failed: { entryId: string; error: string }[] = [];
    errors.forEach((e, i) => e && failed.push({ entryId: entries[i].entryId, error: e.message }));
    return failed;
  }

  subscribe(topic: string, _metadata: Record<string, string>, handler: MessageHandler): TopicSubscription {
    const reader = new TopicReader(this.redis(), this.writes, topic, this.settings, this.consumer, handler, this.log);
    this.readers.add(reader);
    reader.start();
    return {
      close: () => {
        this.readers.delete(reader);
        reader.close();
      },
    };
  }

  private redis(): ScriptClient {
    if (!this.client) throw new Error('pubsub.redis is not initialised');
    return this.client;
  }

  async close(): Promise<void> {
    for (const r of this.readers) r.close();
    this.readers.clear();
    this.client?.disconnect();
    this.client = undefined;
  }
}

const F_DATA = Buffer.from('data');
const F_CONTENT_TYPE = Buffer.from('contentType');
const F_METADATA = Buffer.from('metadata');
const EMPTY = Buffer.alloc(0);

/** A stream entry's field/value items for one message. */
function fieldsOf(a: PendingAdd): (string | Buffer)[] {
  const fields: (string | Buffer)[] = ['data', a.data];
  if (a.contentType !== undefined) fields.push('contentType', a.contentType);
  if (a.metadata !== undefined) fields.push('metadata', a.metadata);
  return fields;
}

function isEmpty(o: Record<string, string>): boolean {
  for (const _ in o) return false;
  return true;
}

/** Where a reader's acks go: one object per reader, so batching them needs no key string per ack. */
interface AckTarget {
  topic: string;
  group: string;
}

/** A message without metadata shares this one (handlers only read it). */
const NO_METADATA: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** Reads one topic for one consumer: new messages, and pending ones others left behind. */
class TopicReader {
  private readonly blocking: Redis;
  private closed = false;
  private readonly inFlight = new Set<string>();
  private readonly ackTarget: AckTarget;
  /** the last contentType read, as bytes and text: nearly every entry of a stream has the same. */
  private lastContentType?: { bytes: Buffer; text: string };
  private wake?: () => void;
  private claimTimer?: NodeJS.Timeout;

  private readonly client: Redis;
  private readonly writes: WriteBatcher;
  private readonly topic: string;
  private readonly s: StreamSettings;
  private readonly consumer: string;
  private readonly handler: MessageHandler;
  private readonly log: Logger;

  constructor(client: Redis, writes: WriteBatcher, topic: string, s: StreamSettings, consumer: string, handler: MessageHandler, log: Logger) {
    this.client = client;
    this.writes = writes;
    this.topic = topic;
    this.s = s;
    this.consumer = consumer;
    this.handler = handler;
    this.log = log;
    this.ackTarget = { topic, group: s.consumerGroup };
    // XREADGROUP BLOCK holds its connection: one of its own per topic
    this.blocking = client.duplicate();
    this.blocking.on('error', () => undefined);
  }

  start(): void {
    void this.readLoop();
    const claim = async () => {
      if (this.closed) return;
      await this.claimIdle().catch((e: Error) => this.log.debug({ topic: this.topic }, `claiming pending messages: ${e.message}`));
      if (!this.closed) {
        this.claimTimer = setTimeout(() => void claim(), this.s.redeliverIntervalMs);
        this.claimTimer.unref();
      }
    };
    this.claimTimer = setTimeout(() => void claim(), Math.min(this.s.redeliverIntervalMs, 1000));
    this.claimTimer.unref();
  }

  private async ensureGroup(): Promise<void> {
    try {
      // from the start of the stream: a group created after messages were published still gets them
      await this.client.call('XGROUP', 'CREATE', this.topic, this.s.consumerGroup, '0', 'MKSTREAM');
    } catch (e) {
      if (!/BUSYGROUP/.test((e as Error).message)) throw e;
    }
  }

  /** Resolves when a delivery finishes, or after `ms` when given. */
  private slotFreed(ms?: number): Promise<void> {
    return new Promise<void>((r) => {
      this.wake = r;
      if (ms !== undefined) setTimeout(r, ms);
    });
  }

  private async readLoop(): Promise<void> {
    let groupReady = false;
    let refillBy = 0;
    while (!this.closed) {
      try {
        if (!groupReady) {
          await this.ensureGroup();
          groupReady = true;
        }
        const room = this.s.concurrency - this.inFlight.size;
        if (room <= 0) {
          refillBy = 0;
          await this.slotFreed();
          continue;
        }
        // refill in batches: reading as soon as one slot frees would fetch one message per round
        // trip under load; waiting (briefly: a delivery may hang) for half the slots reads many at once
        if (this.inFlight.size > 0 && room < this.s.concurrency / 2) {
          const now = performance.now();
          refillBy ||= now + REFILL_WAIT_MS;
          if (now < refillBy) {
            await this.slotFreed(refillBy - now);
            continue;
          }
        }
        refillBy = 0;
        const res = (await this.blocking.xreadgroupBuffer('GROUP', this.s.consumerGroup, this.consumer, 'COUNT', room, 'BLOCK', 1000, 'STREAMS', this.topic, '>')) as [Buffer, Entry[]][] | null;
        for (const [, entries] of res ?? []) for (const e of entries) this.handle(e);
      } catch (e) {
        if (this.closed) return;
        const msg = (e as Error).message;
        if (/NOGROUP/.test(msg)) groupReady = false; // the stream or group was deleted: make it again
        else this.log.warn({ topic: this.topic }, `reading the stream: ${msg}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Takes over messages pending longer than processingTimeout on any consumer of the group. */
  private async claimIdle(): Promise<void> {
    let cursor = '0-0';
    do {
      const room = Math.max(this.s.concurrency - this.inFlight.size, 0);
      if (room === 0 || this.closed) return;
      // the Buffer form exists at run time but not in ioredis' types
      const claim = (this.client as unknown as { xautoclaimBuffer(...a: (string | number)[]): Promise<unknown> }).xautoclaimBuffer.bind(this.client);
      const res = (await claim(this.topic, this.s.consumerGroup, this.consumer, this.s.processingTimeoutMs, cursor, 'COUNT', room)) as [Buffer, Entry[], unknown?];
      cursor = res[0].toString();
      for (const e of res[1]) this.handle(e);
    } while (cursor !== '0-0');
  }

  private handle([idBuf, fields]: Entry): void {
    const id = idBuf.toString('latin1'); // ids are ASCII digits and '-': no UTF-8 decoding
    if (!fields || this.inFlight.has(id)) return; // a trimmed entry, or one we are still handling
    let data: Buffer = EMPTY;
    let contentType: string | undefined;
    let metadata = NO_METADATA;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      // names compared as bytes: no string per field per message
      const k = fields[i];
      if (k.equals(F_DATA)) data = fields[i + 1];
      else if (k.equals(F_CONTENT_TYPE)) contentType = this.contentTypeOf(fields[i + 1]);
      else if (k.equals(F_METADATA)) {
        try {
          metadata = JSON.parse(fields[i + 1].toString()) as Record<string, string>;
        } catch {
          metadata = NO_METADATA;
        }
      }
    }
    this.inFlight.add(id);
    this.handler({ topic: this.topic, data, metadata, contentType }).then(
      () => {
        this.writes.xack(this.ackTarget, id);
        this.settled(id);
      },
      () => this.settled(id), // stays pending: claimed again after processingTimeout
    );
  }

  private contentTypeOf(bytes: Buffer): string {
    const last = this.lastContentType;
    if (last && last.bytes.equals(bytes)) return last.text;
    const text = bytes.toString();
    this.lastContentType = { bytes: Buffer.from(bytes), text }; // a copy: not to hold the reply's memory
    return text;
  }

  private settled(id: string): void {
    this.inFlight.delete(id);
    this.wake?.();
    this.wake = undefined;
  }

  close(): void {
    this.closed = true;
    if (this.claimTimer) clearTimeout(this.claimTimer);
    this.wake?.();
    this.blocking.disconnect();
  }
}

export const factory: ComponentFactory = () => new RedisStreamsPubSub();
