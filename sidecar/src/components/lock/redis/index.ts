/**
 * lock.redis: a lock is one Redis string, its value the owner. Taking it is `SET key owner NX PX
 * <expiry>` (set only when absent, with Redis's own expiry), so at most one owner holds it and an
 * owner that dies frees it when the expiry passes. Releasing runs one Lua script that deletes
 * the key only when it still holds the caller's owner, so nobody frees a lock they do not hold.
 *
 * Connection metadata as state.redis reads it (REDIS_CONNECTION); like the reference store, a
 * Redis with replicas is refused: a lock taken on the primary could be lost in a failover.
 */
import type { Redis } from 'ioredis';
import { decodeMetadata } from '../../metadata/decode.ts';
import { connectRedis, RedisClientHolder } from '../../state/redis/connection.ts';
import { redisOptions } from '../../state/redis/index.ts';
import type { ComponentFactory, ComponentSpec } from '../../types.ts';
import { UNLOCK_STATUS, type LockStore, type TryLockRequest, type UnlockRequest, type UnlockStatus } from '../types.ts';
import { METADATA } from './metadata.ts';

/** -1: no such lock; -2: held by another owner; 1: deleted. */
const UNLOCK = `
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if v ~= ARGV[1] then return -2 end
return redis.call('DEL', KEYS[1])
`;

interface ScriptedRedis extends Redis {
  rtUnlock(key: string, owner: string): Promise<number>;
}

/** `connected_slaves:<n>` of INFO replication; 0 when the server does not say. */
export function connectedReplicas(info: string): number {
  const m = /^connected_slaves:(\d+)/m.exec(info);
  return m ? Number(m[1]) : 0;
}

class RedisLockStore extends RedisClientHolder<ScriptedRedis> implements LockStore {
  protected readonly kind = 'lock.redis';

  async init(spec: ComponentSpec): Promise<void> {
    const opts = redisOptions(decodeMetadata(METADATA, spec.metadata));
    const client = await connectRedis<ScriptedRedis>(opts, { rtUnlock: { numberOfKeys: 1, lua: UNLOCK } });
    this.client = client;
    const replicas = connectedReplicas(await client.info('replication').catch(() => ''));
    if (replicas > 0) throw new Error(`the Redis at ${opts.host}:${opts.port} has ${replicas} replica(s): lock.redis needs a Redis without replication, where a failover cannot lose a held lock`);
  }

  capabilities(): string[] {
    return [];
  }

  async tryLock(req: TryLockRequest): Promise<boolean> {
    return (await this.redis().set(req.key, req.lockOwner, 'PX', req.expiryInSeconds * 1000, 'NX')) === 'OK';
  }

  async unlock(req: UnlockRequest): Promise<UnlockStatus> {
    const n = await this.redis().rtUnlock(req.key, req.lockOwner);
    if (n === -1) return UNLOCK_STATUS.LOCK_DOES_NOT_EXIST;
    if (n === -2) return UNLOCK_STATUS.LOCK_BELONGS_TO_OTHERS;
    return n >= 0 ? UNLOCK_STATUS.SUCCESS : UNLOCK_STATUS.INTERNAL_ERROR;
  }

}

export const factory: ComponentFactory = () => new RedisLockStore();
