/**
 * configuration.redis through ioredis, on the connection settings of state.redis. Items are
 * plain Redis strings in the reference's `value||version` format (value.ts); keys of another
 * type are skipped. Get reads the keys asked for with MGET, or every key (SCAN) when none is.
 *
 * Subscribe listens to keyspace notifications on one subscriber connection per store (SUBSCRIBE
 * per key, PSUBSCRIBE for a subscription to every key). A notification names the key only, so
 * the key is read again and its item (or an empty one once it is gone) goes to the handler. A
 * key's reads and deliveries run one at a time (per-key.ts), and a notification that arrives
 * while the key's read is still queued shares it: every change is followed by a delivery of its
 * value or a later one, in order per key; values overwritten faster than they are read may be
 * skipped (docs/configuration.md). The server needs `notify-keyspace-events` with K$gxe: the
 * first subscribe adds what is missing to the server's flags (CONFIG SET), keeping the others.
 * When the subscriber connection comes back after a loss, each watcher's keys are read again and
 * delivered, for the changes it may have missed meanwhile.
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { decodeMetadata } from '../../metadata/decode.ts';
import { closeRedis, connectRedis, RedisClientHolder } from '../../state/redis/connection.ts';
import { redisOptions } from '../../state/redis/index.ts';
import type { ComponentContext, ComponentSpec } from '../../types.ts';
import { PerKeySerial } from '../per-key.ts';
import { emptyItem, type ConfigurationChangeHandler, type ConfigurationItems, type ConfigurationStore, type ConfigurationWatch, type ConfigurationWatchRequest } from '../types.ts';
import { METADATA } from './metadata.ts';
import { keyOfChannel, keyspaceChannel, parseRedisItem, withNeededEvents } from './value.ts';

/** Keys read per MGET, and asked for per SCAN step, when reading every key. */
const BATCH = 500;

interface Watcher {
  keys: Set<string> | undefined;
  notify(key: string): void;
}

class RedisConfigurationStore extends RedisClientHolder implements ConfigurationStore {
  protected readonly kind = 'redis configuration store';
  private subscriber?: Redis;
  private db = 0;
  private log?: Logger;
  private name = '';
  private readonly watchers = new Set<Watcher>();
  /** Channel (or pattern) → how many watchers listen on it. */
  private readonly channels = new Map<string, number>();
  private eventsChecked?: Promise<void>;

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const opts = redisOptions(md);
    this.db = md.redisDB;
    this.log = ctx.log;
    this.name = spec.name;
    this.client = await connectRedis(opts);
  }

  capabilities(): string[] {
    return [];
  }

  async get(keys: string[]): Promise<ConfigurationItems> {
    const out: ConfigurationItems = {};
    if (keys.length > 0) {
      await this.readInto(out, [...new Set(keys)]);
      return out;
    }
    const redis = this.redis();
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', '*', 'COUNT', BATCH);
      cursor = next;
      await this.readInto(out, found);
    } while (cursor !== '0');
    return out;
  }

  async subscribe(req: ConfigurationWatchRequest, onChange: ConfigurationChangeHandler): Promise<ConfigurationWatch> {
    const sub = await this.sub();
    await (this.eventsChecked ??= this.enableEvents().catch((e: unknown) => {
      this.eventsChecked = undefined;
      throw e;
    }));
    const serial = new PerKeySerial();
    const queued = new Set<string>();
    let stopped = false;
    const watcher: Watcher = {
      keys: req.keys.length ? new Set(req.keys) : undefined,
      notify: (key) => {
        if (stopped || queued.has(key)) return;
        queued.add(key);
        serial.run(key, async () => {
          queued.delete(key);
          if (stopped) return;
          let item;
          try {
            item = await this.readOne(key);
          } catch (e) {
            this.log?.warn({ component: this.name, key, err: (e as Error).message }, 'configuration.redis: could not read a changed key');
            return;
          }
          // a key of another type than string is no configuration item
          if (item === null || stopped) return;
          await onChange({ [key]: item ?? emptyItem() });
        });
      },
    };
    const channels = watcher.keys ? [...watcher.keys].map((k) => keyspaceChannel(this.db, k)) : [keyspaceChannel(this.db, '*')];
    this.watchers.add(watcher);
    try {
      for (const c of channels) await this.listen(sub, c, !watcher.keys);
    } catch (e) {
      this.watchers.delete(watcher);
      for (const c of channels) await this.unlisten(sub, c, !watcher.keys).catch(() => undefined);
      throw e;
    }
    return {
      stop: async () => {
        if (stopped) return;
        stopped = true;
        this.watchers.delete(watcher);
        for (const c of channels) await this.unlisten(sub, c, !watcher.keys).catch(() => undefined);
        await serial.idle();
      },
    };
  }

  override async close(): Promise<void> {
    const sub = this.subscriber;
    this.subscriber = undefined;
    this.watchers.clear();
    this.channels.clear();
    await closeRedis(sub);
    await super.close();
  }

  /** Items of `keys` into `out`; MGET answers nil for a missing key and for one of another type. */
  private async readInto(out: ConfigurationItems, keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += BATCH) {
      const batch = keys.slice(i, i + BATCH);
      const values = await this.redis().mget(batch);
      values.forEach((v, j) => {
        // as the reference: an item with an empty value is left out
        if (v === null) return;
        const item = parseRedisItem(v);
        // an own entry whatever the key (a key "__proto__" stays data)
        if (item.value !== '') Object.defineProperty(out, batch[j], { value: item, enumerable: true, writable: true, configurable: true });
      });
    }
  }

  /** A changed key's item: undefined when it is gone, null when it holds another type. */
  private async readOne(key: string): Promise<ReturnType<typeof parseRedisItem> | undefined | null> {
    try {
      const v = await this.redis().get(key);
      return v === null ? undefined : parseRedisItem(v);
    } catch (e) {
      if (/WRONGTYPE/.test((e as Error).message)) return null;
      throw e;
    }
  }

  /** The subscriber connection, made with the first subscription. */
  private async sub(): Promise<Redis> {
    if (this.subscriber) return this.subscriber;
    // named, so that an operator sees it in CLIENT LIST
    const sub = this.redis().duplicate({ enableAutoPipelining: false, connectionName: `rt-configuration-${this.name}`.replace(/[^\x21-\x7e]/g, '_') });
    sub.on('error', () => undefined);
    sub.on('message', (channel: string) => this.dispatch(channel, false));
    sub.on('pmessage', (_pattern: string, channel: string) => this.dispatch(channel, true));
    let connected = false;
    // ioredis subscribes again after a lost connection; what changed meanwhile is read again
    sub.on('ready', () => {
      if (connected) void this.resync();
      connected = true;
    });
    this.subscriber = sub;
    if (sub.status === 'wait') await sub.connect();
    return sub;
  }

  /** Each watcher's keys read again and delivered (every key for those watching every key). */
  private async resync(): Promise<void> {
    try {
      const all = [...this.watchers].some((w) => !w.keys) ? Object.keys(await this.get([])) : [];
      for (const w of this.watchers) for (const key of w.keys ?? all) w.notify(key);
    } catch (e) {
      this.log?.warn({ component: this.name, err: (e as Error).message }, 'configuration.redis: could not read the items again after a reconnect');
    }
  }

  private dispatch(channel: string, pattern: boolean): void {
    const key = keyOfChannel(this.db, channel);
    if (key === undefined) return;
    for (const w of this.watchers) {
      // a key's own channel reaches its watchers, the pattern those of every key
      if (pattern ? !w.keys : w.keys?.has(key)) w.notify(key);
    }
  }

  private async listen(sub: Redis, channel: string, pattern: boolean): Promise<void> {
    const n = this.channels.get(channel) ?? 0;
    this.channels.set(channel, n + 1);
    if (n > 0) return;
    try {
      await (pattern ? sub.psubscribe(channel) : sub.subscribe(channel));
    } catch (e) {
      this.channels.delete(channel);
      throw e;
    }
  }

  private async unlisten(sub: Redis, channel: string, pattern: boolean): Promise<void> {
    const n = (this.channels.get(channel) ?? 1) - 1;
    if (n > 0) {
      this.channels.set(channel, n);
      return;
    }
    this.channels.delete(channel);
    await (pattern ? sub.punsubscribe(channel) : sub.unsubscribe(channel));
  }

  /**
   * Adds the keyspace-event classes subscribe needs to the server's. A server that refuses
   * CONFIG GET (a managed Redis) may have them set by its operator: subscribe goes on, with a
   * warning; one that shows them missing and refuses CONFIG SET fails the subscribe.
   */
  private async enableEvents(): Promise<void> {
    let current: string;
    try {
      const r = (await this.redis().config('GET', 'notify-keyspace-events')) as string[];
      current = r[1] ?? '';
    } catch (e) {
      this.log?.warn({ component: this.name, err: (e as Error).message }, 'configuration.redis: cannot read notify-keyspace-events; the server must have K$gxe set for subscriptions to see changes');
      return;
    }
    const wanted = withNeededEvents(current);
    if (wanted === undefined) return;
    try {
      await this.redis().config('SET', 'notify-keyspace-events', wanted);
    } catch (e) {
      throw new Error(`the Redis server's notify-keyspace-events is "${current}" and it refused to add K$gxe (${(e as Error).message}); set notify-keyspace-events to include K$gxe (e.g. KEA) on the server`, { cause: e });
    }
  }
}

export const factory = () => new RedisConfigurationStore();
