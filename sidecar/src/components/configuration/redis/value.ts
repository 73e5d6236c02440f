/**
 * The reference's format of a configuration item in Redis: a string `value||version`. As the
 * reference reads it, the text is split at every `||`: the value is what comes before the first,
 * the version what lies between the first and the second (so a value cannot hold `||`).
 */
import type { ConfigurationItem } from '../types.ts';

const SEPARATOR = '||';

export function parseRedisItem(text: string): ConfigurationItem {
  const parts = text.split(SEPARATOR);
  return { value: parts[0] ?? '', version: parts[1] ?? '', metadata: {} };
}

/** The channel of a key's keyspace notifications in database `db`. */
export function keyspaceChannel(db: number, key: string): string {
  return `__keyspace@${db}__:${key}`;
}

/** The key of a keyspace channel of database `db`; undefined for another channel. */
export function keyOfChannel(db: number, channel: string): string | undefined {
  const prefix = `__keyspace@${db}__:`;
  return channel.startsWith(prefix) ? channel.slice(prefix.length) : undefined;
}

/**
 * The keyspace-event classes subscribe needs: K (keyspace channel), $ (SET and the other string
 * commands), g (DEL, EXPIRE, RENAME, …), x (expired) and e (evicted), as the reference sets them.
 * `A` stands for every class but `m`, `n` and `d`.
 */
export const NEEDED_EVENTS = 'K$gxe';

/**
 * The server's `notify-keyspace-events` flags with what subscribe needs added; undefined when
 * they are there already. Flags someone else set are kept (the reference overwrites them).
 */
export function withNeededEvents(current: string): string | undefined {
  const has = new Set(current);
  const covered = (c: string) => has.has(c) || (has.has('A') && 'g$lshzxet'.includes(c));
  const missing = [...NEEDED_EVENTS].filter((c) => !covered(c));
  return missing.length ? current + missing.join('') : undefined;
}
