/**
 * Opening and closing the ioredis client of a Redis component (state, lock, bindings …), one way
 * for all: ioredis loaded only when a Redis component starts, its errors surfacing on the calls
 * (without a listener ioredis would log them unasked), the component's Lua scripts defined as
 * commands, and a start that fails leaving no connection behind.
 */
import type { Redis, RedisOptions } from 'ioredis';

export interface RedisScript {
  lua: string;
  /** Keys the command takes first (absent: the caller passes the count). */
  numberOfKeys?: number;
}

/** A connected client (`PING` answered), with `scripts` defined as commands of those names. */
export async function connectRedis<C extends Redis = Redis>(opts: RedisOptions, scripts: Record<string, RedisScript> = {}): Promise<C> {
  const { Redis } = await import('ioredis');
  const client = new Redis(opts);
  client.on('error', () => undefined);
  for (const [name, script] of Object.entries(scripts)) client.defineCommand(name, script);
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    client.disconnect();
    throw e;
  }
  return client as C;
}

/** QUIT (given a second to be answered), then the socket is closed whatever happened. */
export async function closeRedis(client: Redis | undefined): Promise<void> {
  if (!client) return;
  await Promise.race([client.quit().catch(() => undefined), new Promise((r) => setTimeout(r, 1000).unref())]);
  client.disconnect();
}

/** What every Redis component does with its client alike: ping it, close it, refuse calls before init. */
export abstract class RedisClientHolder<C extends Redis = Redis> {
  protected client?: C;
  /** Names the component in "is not connected". */
  protected abstract readonly kind: string;

  async ping(): Promise<void> {
    await this.redis().ping();
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    await closeRedis(c);
  }

  protected redis(): C {
    if (!this.client) throw new Error(`${this.kind} is not connected`);
    return this.client;
  }
}
