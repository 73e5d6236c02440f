/**
 * Key prefixing, as the ecosystem's state API does it. Component metadata `keyPrefix`:
 * `appid` (default) → `<appId>||<key>`, `name` → `<store name>||<key>`,
 * `namespace` → `<namespace>.<appId>||<key>`, `none` → the key as sent, any other text →
 * `<text>||<key>`. So apps sharing a store do not see each other's keys unless they opt in.
 */
import { malformed } from '../http/errors.ts';

export const SEPARATOR = '||';
/** Longest key accepted, in UTF-8 bytes, before the prefix (fits every store's key index). */
export const MAX_KEY_BYTES = 1024;

/** The prefix (with its `||`) a store's keys get; '' for `none`. Throws on an unusable keyPrefix. */
export function keyPrefixFor(keyPrefix: string | undefined, storeName: string, appId: string, namespace: string): string {
  const strategy = keyPrefix ?? 'appid';
  let prefix: string;
  switch (strategy.toLowerCase()) {
    case '':
    case 'appid':
      prefix = appId;
      break;
    case 'name':
      prefix = storeName;
      break;
    case 'namespace':
      prefix = namespace ? `${namespace}.${appId}` : appId;
      break;
    case 'none':
      prefix = '';
      break;
    default:
      prefix = strategy;
  }
  if (prefix.includes(SEPARATOR)) throw new Error(`state store "${storeName}": keyPrefix "${strategy}" must not contain "${SEPARATOR}"`);
  return prefix ? prefix + SEPARATOR : '';
}

/** Checks a key sent by a caller; throws a 400 naming what is wrong. */
export function checkKey(key: unknown): string {
  if (typeof key !== 'string') throw malformed('state key must be a string');
  if (key === '') throw malformed('state key must not be empty');
  if (key.includes(SEPARATOR)) throw malformed(`state key "${clip(key)}" must not contain "${SEPARATOR}"`);
  // the stores keep keys as UTF-8 text: a NUL or a lone surrogate would not survive the trip
  if (key.includes('\0') || !key.isWellFormed()) throw malformed(`state key "${clip(key)}" must be valid Unicode text without NUL characters`);
  if (key.length > MAX_KEY_BYTES / 3 && Buffer.byteLength(key) > MAX_KEY_BYTES) {
    throw malformed(`state key is ${Buffer.byteLength(key)} bytes; the limit is ${MAX_KEY_BYTES}`);
  }
  return key;
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
