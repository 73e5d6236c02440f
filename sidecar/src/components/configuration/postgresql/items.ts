/**
 * Rows and notifications of configuration.postgresql as items. The table is the reference's:
 * `key`, `value`, `version` (text) and `metadata` (JSON), where a key may have several rows and
 * the one with the highest numeric version counts (a version that is not a number counts as -1,
 * and the first row wins a tie). A notification is the JSON its trigger sends,
 * `{"data": {"key", "value", "version", "metadata"}, …}`, column names in any case.
 */
import type { ConfigurationItem, ConfigurationItems } from '../types.ts';

export interface ItemRow {
  key: unknown;
  value: unknown;
  version: unknown;
  metadata: unknown;
}

/** A channel name as the reference allows it (lower case, digits, `_`, `.`, `/`), quoted for LISTEN. */
export function listenChannel(name: string): string {
  if (!/^[a-z0-9_./]{1,63}$/.test(name)) throw new Error(`notify channel "${name.slice(0, 80)}" must be 1 to 63 lower-case letters, digits, '_', '.' or '/'`);
  return `"${name}"`;
}

function numericVersion(v: string): number {
  return /^[+-]?\d+$/.test(v) ? Number(v) : -1;
}

function text(v: unknown): string {
  return v === null || v === undefined ? '' : typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v as number);
}

/** A JSON object's members as strings; anything else: none. */
function stringMap(v: unknown): Record<string, string> {
  let o = v;
  if (typeof o === 'string') {
    try {
      o = JSON.parse(o);
    } catch {
      return {};
    }
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(o)) Object.defineProperty(out, k, { value: text(x), enumerable: true, writable: true, configurable: true });
  return out;
}

export function rowItem(r: ItemRow): ConfigurationItem {
  return { value: text(r.value), version: text(r.version), metadata: stringMap(r.metadata) };
}

/** One item per key: the row with the highest numeric version. */
export function latestPerKey(rows: ItemRow[]): ConfigurationItems {
  const out: ConfigurationItems = {};
  const best = new Map<string, number>();
  for (const r of rows) {
    const key = text(r.key);
    const item = rowItem(r);
    const n = numericVersion(item.version);
    const seen = best.get(key);
    if (seen === undefined || n > seen) {
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
      best.set(key, n);
    }
  }
  return out;
}

/** The key and item a notification carries; undefined when it is not one of a row. */
export function notificationItem(payload: string): { key: string; item: ConfigurationItem } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const data = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>).data : undefined;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
  const row: Partial<ItemRow> = {};
  for (const [k, v] of Object.entries(data)) {
    const l = k.toLowerCase();
    if (l === 'key' || l === 'value' || l === 'version' || l === 'metadata') row[l] = v;
  }
  if (typeof row.key !== 'string') return undefined;
  return { key: row.key, item: rowItem(row as ItemRow) };
}
