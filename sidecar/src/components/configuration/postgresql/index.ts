/**
 * configuration.postgresql through pg, on state.postgresql's connection code (connection.ts).
 * The table is the reference's and is not created here: `key`, `value`, `version`, `metadata`,
 * filled by the operator's tools (docs/configuration.md has the statements). Get reads the keys
 * asked for, or every row, and keeps the highest version per key (items.ts).
 *
 * Subscribe LISTENs on the channel the table's trigger notifies (component metadata
 * `notifyChannel`, else the subscription's `pgNotifyChannel`), on one connection per store. A
 * notification carries its row, so every change reaches a subscription with its own value, in
 * commit order per key. When that connection is lost it is made again, and each subscription
 * then gets its keys' current items, for the changes it may have missed meanwhile.
 */
import type { Client, Pool } from 'pg';
import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../../../../../shared/backoff.ts';
import { decodeMetadata } from '../../metadata/decode.ts';
import { openPostgresPool, postgresConnectionConfig } from '../../state/postgresql/connection.ts';
import { qualifiedTable } from '../../state/postgresql/index.ts';
import type { ComponentContext, ComponentSpec } from '../../types.ts';
import { PerKeySerial } from '../per-key.ts';
import { ConfigurationRequestError, type ConfigurationChangeHandler, type ConfigurationItem, type ConfigurationItems, type ConfigurationStore, type ConfigurationWatch, type ConfigurationWatchRequest } from '../types.ts';
import { latestPerKey, listenChannel, notificationItem, type ItemRow } from './items.ts';
import { METADATA } from './metadata.ts';

type PgModule = typeof import('pg').default;

/** Between tries to LISTEN again after a lost connection: 200 ms, doubling, at most 2 s. */
const RELISTEN_BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 2000 };

interface Watcher {
  channel: string;
  keys: Set<string> | undefined;
  deliver(key: string, item: ConfigurationItem): void;
  resync(): void;
}

class PostgresConfigurationStore implements ConfigurationStore {
  private pg?: PgModule;
  private pool?: Pool;
  private listener?: Promise<Client>;
  private connection: ReturnType<typeof postgresConnectionConfig> = {};
  private table = '';
  private plainTable = '';
  private notifyChannel?: string;
  private timeout = 20_000;
  private log?: Logger;
  private name = '';
  private closed = false;
  private readonly watchers = new Set<Watcher>();
  /** Quoted channel → how many watchers listen on it. */
  private readonly channels = new Map<string, number>();

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const table = qualifiedTable(md.table);
    if (md.notifyChannel) listenChannel(md.notifyChannel);
    this.notifyChannel = md.notifyChannel;
    this.connection = postgresConnectionConfig(md.connectionString);
    this.timeout = md.timeout;
    this.table = table.quoted;
    this.plainTable = md.table;
    this.log = ctx.log;
    this.name = spec.name;
    const pool = await openPostgresPool(md.connectionString, {
      max: md.maxConns > 0 ? md.maxConns : 10,
      queryTimeout: md.timeout,
      onError: (e) => ctx.log.warn({ component: spec.name, err: e.message }, 'configuration.postgresql connection error'),
    });
    this.pool = pool;
    this.pg = (await import('pg')).default;
    const r = await pool.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table.quoted]);
    if (!r.rows[0]?.t) throw new Error(`table "${md.table}" does not exist: create it with the columns key, value, version and metadata (docs/configuration.md)`);
  }

  capabilities(): string[] {
    return [];
  }

  async get(keys: string[]): Promise<ConfigurationItems> {
    const db = this.db();
    const columns = 'key, value, version, metadata';
    // one key (the common case) by equality: cheaper to bind and plan than = ANY(array)
    const r =
      keys.length === 1
        ? await db.query<ItemRow>({ name: `rt_cfg_get1_${this.plainTable}`, text: `SELECT ${columns} FROM ${this.table} WHERE key = $1`, values: keys })
        : keys.length
          ? await db.query<ItemRow>({ name: `rt_cfg_get_${this.plainTable}`, text: `SELECT ${columns} FROM ${this.table} WHERE key = ANY($1::text[])`, values: [keys] })
          : await db.query<ItemRow>(`SELECT ${columns} FROM ${this.table}`);
    return latestPerKey(r.rows);
  }

  async subscribe(req: ConfigurationWatchRequest, onChange: ConfigurationChangeHandler): Promise<ConfigurationWatch> {
    const name = this.notifyChannel ?? Object.entries(req.metadata).find(([k]) => k.toLowerCase() === 'pgnotifychannel')?.[1];
    if (!name) throw new ConfigurationRequestError(`no notify channel: set "notifyChannel" in the component's metadata, or "pgNotifyChannel" in the subscription's metadata`);
    let channel: string;
    try {
      channel = listenChannel(name);
    } catch (e) {
      throw new ConfigurationRequestError((e as Error).message);
    }
    const serial = new PerKeySerial();
    let stopped = false;
    const send = (items: ConfigurationItems, key: string) =>
      serial.run(key, async () => {
        if (!stopped) await onChange(items);
      });
    const watcher: Watcher = {
      channel,
      keys: req.keys.length ? new Set(req.keys) : undefined,
      deliver: (key, item) => send({ [key]: item }, key),
      resync: () => {
        this.get(req.keys).then(
          (items) => {
            for (const [k, item] of Object.entries(items)) send({ [k]: item }, k);
          },
          (e: unknown) => this.log?.warn({ component: this.name, err: (e as Error).message }, 'configuration.postgresql: could not read the items again after a reconnect'),
        );
      },
    };
    await this.listen(channel);
    this.watchers.add(watcher);
    return {
      stop: async () => {
        if (stopped) return;
        stopped = true;
        this.watchers.delete(watcher);
        await this.unlisten(channel).catch(() => undefined);
        await serial.idle();
      },
    };
  }

  async ping(): Promise<void> {
    await this.db().query('SELECT 1');
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watchers.clear();
    this.channels.clear();
    const listener = this.listener;
    this.listener = undefined;
    await listener?.then((c) => c.end()).catch(() => undefined);
    const p = this.pool;
    this.pool = undefined;
    await p?.end().catch(() => undefined);
  }

  private db(): Pool {
    if (!this.pool) throw new Error('postgresql configuration store is not connected');
    return this.pool;
  }

  private async listen(channel: string): Promise<void> {
    const n = this.channels.get(channel) ?? 0;
    this.channels.set(channel, n + 1);
    if (n > 0) return;
    try {
      const c = await this.connect();
      await c.query(`LISTEN ${channel}`);
    } catch (e) {
      this.channels.delete(channel);
      throw e;
    }
  }

  private async unlisten(channel: string): Promise<void> {
    const n = (this.channels.get(channel) ?? 1) - 1;
    if (n > 0) {
      this.channels.set(channel, n);
      return;
    }
    this.channels.delete(channel);
    const c = await this.listener;
    await c?.query(`UNLISTEN ${channel}`);
  }

  /** The listening connection, made with the first subscription and made again when lost. */
  private connect(): Promise<Client> {
    if (this.listener) return this.listener;
    const pg = this.pg;
    if (!pg || this.closed) return Promise.reject(new Error('postgresql configuration store is not connected'));
    const client = new pg.Client({ connectionTimeoutMillis: 5000, ...this.connection, query_timeout: this.timeout });
    const made = client.connect().then(() => client);
    this.listener = made;
    made.catch(() => {
      if (this.listener === made) this.listener = undefined;
    });
    client.on('notification', (m) => {
      const found = m.payload === undefined ? undefined : notificationItem(m.payload);
      if (!found) return;
      const channel = `"${m.channel}"`;
      for (const w of this.watchers) if (w.channel === channel && (!w.keys || w.keys.has(found.key))) w.deliver(found.key, found.item);
    });
    let lost = false;
    const onLost = (e?: Error) => {
      if (lost) return;
      lost = true;
      if (this.listener === made) this.listener = undefined;
      if (this.closed) return;
      this.log?.warn({ component: this.name, err: e?.message }, 'configuration.postgresql: the listening connection was lost; connecting again');
      void this.relisten(1);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    return made;
  }

  /** After a lost connection: LISTEN again on every channel (waits of RELISTEN_BACKOFF between tries), then each watcher reads its items again. */
  private async relisten(attempt: number): Promise<void> {
    if (this.closed || this.channels.size === 0) return;
    try {
      const c = await this.connect();
      for (const ch of this.channels.keys()) await c.query(`LISTEN ${ch}`);
      for (const w of this.watchers) w.resync();
    } catch (e) {
      this.log?.debug({ component: this.name, err: (e as Error).message, attempt }, 'configuration.postgresql: reconnect failed');
      await new Promise((r) => setTimeout(r, backoffDelay(RELISTEN_BACKOFF, attempt - 1)).unref());
      return this.relisten(attempt + 1);
    }
  }
}

export const factory = () => new PostgresConfigurationStore();
