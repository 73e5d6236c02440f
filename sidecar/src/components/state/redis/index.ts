/**
 * state.redis through ioredis. Metadata as the ecosystem names it: `redisHost` (host:port,
 * required), `redisPassword`, `redisUsername`, `redisDB` (default 0), `enableTLS`, and
 * `ttlInSeconds`: the TTL of a write whose request names none (as the reference store has it).
 *
 * Etags are the item's `version` field, bumped by every write. Etag checks and transactions
 * run in one Lua script each (scripts.ts), so they are atomic in Redis. Reads are one plain
 * HMGET. TTL uses Redis's own key expiry (`ttlInSeconds` request metadata → EXPIRE; a write
 * without it → PERSIST), with the expiry time kept in the hash for `ttlExpireTime`.
 */
import type { Redis, RedisOptions } from 'ioredis';
import type { ComponentSpec, StateDeleteRequest, StateFeature, StateItem, StateSetRequest, StateStore, StateTransactionOperation } from '../../types.ts';
import { decodeMetadata, type Decoded } from '../../metadata/decode.ts';
import { asBuffer, capabilitiesOf, requestEtag, ttlSeconds } from '../common.ts';
import { EtagMismatchError } from '../errors.ts';
import { connectRedis, RedisClientHolder } from './connection.ts';
import { METADATA, type REDIS_CONNECTION } from './metadata.ts';
import { WRITE } from './scripts.ts';

const FEATURES: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'TTL', 'ACTOR'];
const EMPTY = Buffer.alloc(0);

/** The client with our write script defined as a command. */
interface ScriptedRedis extends Redis {
  rtStateWrite(numKeys: number, ...args: (string | Buffer)[]): Promise<number>;
}

/** Parses `host:port` (`[v6]:port` too); port defaults to 6379. */
export function parseRedisHost(text: string): { host: string; port: number } {
  const t = text.trim();
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(t) ?? /^([^:]+)(?::(\d+))?$/.exec(t);
  if (!m) throw new Error(`metadata redisHost "${text}" is not host:port`);
  const port = m[2] ? Number(m[2]) : 6379;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`metadata redisHost "${text}" has an invalid port`);
  return { host: m[1], port };
}

export function redisOptions(md: Decoded<typeof REDIS_CONNECTION>): RedisOptions {
  if (md.redisType !== 'node') throw new Error(`metadata redisType "${md.redisType}" is not supported: only "node"`);
  if (md.failover) throw new Error('metadata failover (Sentinel) is not supported');
  const { host, port } = parseRedisHost(md.redisHost);
  const opts: RedisOptions = {
    host,
    port,
    db: md.redisDB,
    lazyConnect: true,
    // commands issued in the same tick go out in one write: the big win under concurrency
    enableAutoPipelining: true,
    connectTimeout: 5000,
    maxRetriesPerRequest: 2,
    // after a connection loss: retry with backoff, up to 2 s apart
    retryStrategy: (times) => Math.min(times * 100, 2000),
  };
  if (md.redisUsername) opts.username = md.redisUsername;
  if (md.redisPassword) opts.password = md.redisPassword;
  if (md.enableTLS) opts.tls = { servername: host };
  return opts;
}

class RedisStateStore extends RedisClientHolder<ScriptedRedis> implements StateStore {
  protected readonly kind = 'redis state store';
  /** Component metadata ttlInSeconds: for writes whose request has no ttlInSeconds of its own. */
  private defaultTtl?: number;

  async init(spec: ComponentSpec): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const opts = redisOptions(md);
    this.defaultTtl = md.ttlInSeconds !== undefined && md.ttlInSeconds > 0 ? md.ttlInSeconds : undefined;
    this.client = await connectRedis<ScriptedRedis>(opts, { rtStateWrite: { lua: WRITE } });
  }

  features(): StateFeature[] {
    return FEATURES;
  }

  capabilities(): string[] {
    return capabilitiesOf(FEATURES);
  }

  async get(key: string): Promise<StateItem | undefined> {
    // one plain HMGET (no script): reads are the hot path
    return toItem(key, await this.redis().hmgetBuffer(key, 'data', 'version', 'expires'));
  }

  async bulkGet(keys: string[]): Promise<(StateItem | undefined)[]> {
    return Promise.all(keys.map((k) => this.get(k)));
  }

  async set(req: StateSetRequest): Promise<void> {
    await this.write([{ operation: 'upsert', request: req }]);
  }

  async delete(req: StateDeleteRequest): Promise<void> {
    await this.write([{ operation: 'delete', request: req }]);
  }

  /** All or nothing (one script), like a transaction. */
  async bulkSet(reqs: StateSetRequest[]): Promise<void> {
    await this.write(reqs.map((request) => ({ operation: 'upsert', request })));
  }

  async bulkDelete(reqs: StateDeleteRequest[]): Promise<void> {
    await this.write(reqs.map((request) => ({ operation: 'delete', request })));
  }

  async transact(ops: StateTransactionOperation[]): Promise<void> {
    await this.write(ops);
  }

  private async write(ops: StateTransactionOperation[]): Promise<void> {
    if (ops.length === 0) return;
    const keys: string[] = [];
    const args: (string | Buffer)[] = [];
    for (const op of ops) {
      const r = op.request;
      const etag = requestEtag(r) ?? '';
      const firstWrite = r.options?.concurrency === 'first-write' ? '1' : '0';
      keys.push(r.key);
      if (op.operation === 'upsert') {
        const ttl = r.metadata?.ttlInSeconds !== undefined ? ttlSeconds(r.metadata) : this.defaultTtl;
        args.push('u', etag, firstWrite, ttl === undefined ? '' : String(ttl), asBuffer(op.request.value));
      } else {
        args.push('d', etag, firstWrite, '', EMPTY);
      }
    }
    const failed = await this.redis().rtStateWrite(keys.length, ...keys, ...args);
    if (failed !== 0) {
      const r = ops[failed - 1].request;
      if (r.etag) throw new EtagMismatchError(r.key);
      throw new EtagMismatchError(r.key, `key "${r.key}" already exists and no etag was sent (first-write)`);
    }
  }
}

function toItem(key: string, reply: (Buffer | null)[]): StateItem | undefined {
  const [data, version, expires] = reply;
  if (!data) return undefined;
  const item: StateItem = { key, value: data, etag: version ? version.toString() : '' };
  if (expires) item.metadata = { ttlExpireTime: new Date(Number(expires.toString())).toISOString() };
  return item;
}

export const factory = () => new RedisStateStore();
