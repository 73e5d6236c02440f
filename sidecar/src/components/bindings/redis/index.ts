/**
 * bindings.redis: an output binding on Redis strings, with the reference binding's operations,
 * each on the key named by request metadata `key`:
 *   create     SET key data (a `ttlInSeconds` sets its expiry in the same command: SET … EX)
 *   get        GET key → the value's bytes; nothing when there is none (`delete: "true"`: GETDEL)
 *   delete     DEL key (done whether or not it existed)
 *   increment  INCR key (`ttlInSeconds` then sets the expiry, in one MULTI)
 *   expire     rt's own: EXPIRE key ttlInSeconds (required; 0 or -1 removes the expiry: PERSIST)
 * Request mistakes (no key, a ttlInSeconds that is not a whole number) are the caller's: 400.
 * Connection metadata as state.redis reads it (REDIS_CONNECTION).
 */
import type { Redis } from 'ioredis';
import { malformed } from '../../../http/errors.ts';
import { decodeMetadata } from '../../metadata/decode.ts';
import { MAX_TTL_SECONDS } from '../../state/common.ts';
import { connectRedis, RedisClientHolder } from '../../state/redis/connection.ts';
import { redisOptions } from '../../state/redis/index.ts';
import { bindingDataBytes, type BindingRequest, type BindingResponse, type ComponentFactory, type ComponentSpec, type OutputBinding } from '../../types.ts';
import { METADATA } from './metadata.ts';

const OPERATIONS = ['create', 'get', 'delete', 'increment', 'expire'];

/**
 * `ttlInSeconds` request metadata: a whole number of seconds; 0 or -1 (or absent or blank) is
 * none. Throws the 400 for anything else.
 */
export function ttlOf(metadata: Record<string, string>): number | undefined {
  const raw = metadata.ttlInSeconds?.trim();
  if (raw === undefined || raw === '') return undefined;
  if (!/^-?\d{1,10}$/.test(raw)) throw malformed(`metadata "ttlInSeconds" "${raw.slice(0, 40)}" must be a whole number of seconds`);
  const n = Number(raw);
  if (n < -1 || n > MAX_TTL_SECONDS) throw malformed(`metadata "ttlInSeconds" must be from -1 (no expiry) to ${MAX_TTL_SECONDS}, got ${n}`);
  return n > 0 ? n : undefined;
}

class RedisBinding extends RedisClientHolder<Redis> implements OutputBinding {
  protected readonly kind = 'bindings.redis';

  async init(spec: ComponentSpec): Promise<void> {
    this.client = await connectRedis(redisOptions(decodeMetadata(METADATA, spec.metadata)));
  }

  capabilities(): string[] {
    return [];
  }

  operations(): string[] {
    return OPERATIONS;
  }

  async invoke(req: BindingRequest): Promise<BindingResponse> {
    const key = req.metadata.key;
    if (!key) throw malformed(`bindings.redis ${req.operation}: metadata "key" is required: the Redis key to work on`);
    const redis = this.redis();
    const ttl = ttlOf(req.metadata);
    switch (req.operation) {
      case 'create': {
        const data = Buffer.from(bindingDataBytes(req.data));
        if (ttl) await redis.set(key, data, 'EX', ttl);
        else await redis.set(key, data);
        return {};
      }
      case 'get': {
        const value = req.metadata.delete === 'true' ? await redis.getdelBuffer(key) : await redis.getBuffer(key);
        return value === null ? {} : { data: value };
      }
      case 'delete':
        await redis.del(key);
        return {};
      case 'increment': {
        if (!ttl) {
          await redis.incr(key);
          return {};
        }
        const results = await redis.multi().incr(key).expire(key, ttl).exec();
        const failed = results?.find(([e]) => e);
        if (failed) throw failed[0]!;
        return {};
      }
      case 'expire': {
        if (req.metadata.ttlInSeconds === undefined || req.metadata.ttlInSeconds.trim() === '') {
          throw malformed('bindings.redis expire: metadata "ttlInSeconds" is required: the seconds the key has left (0 or -1: no expiry)');
        }
        if (ttl) await redis.expire(key, ttl);
        else await redis.persist(key);
        return {};
      }
      default:
        // the bindings service checks the operation against operations() first
        throw malformed(`bindings.redis has no operation "${req.operation}"; it has ${OPERATIONS.join(', ')}`);
    }
  }

}

export const factory: ComponentFactory = () => new RedisBinding();
