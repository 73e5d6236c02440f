/**
 * Items as the reference's JSON shows them, over HTTP and in the app deliveries: `value`,
 * `version` and `metadata`, each left out when empty (its Go struct's `omitempty`).
 */
import type { ConfigurationItem, ConfigurationItems } from '../components/configuration/types.ts';

export interface ItemJson {
  value?: string;
  version?: string;
  metadata?: Record<string, string>;
}

export function itemJson(item: ConfigurationItem): ItemJson {
  const out: ItemJson = {};
  if (item.value) out.value = item.value;
  if (item.version) out.version = item.version;
  if (Object.keys(item.metadata).length) out.metadata = item.metadata;
  return out;
}

/** key → item JSON; keys stay own, plain entries (a "__proto__" key is data). */
export function itemsJson(items: ConfigurationItems): Record<string, ItemJson> {
  const out: Record<string, ItemJson> = {};
  for (const [k, v] of Object.entries(items)) Object.defineProperty(out, k, { value: itemJson(v), enumerable: true, writable: true, configurable: true });
  return out;
}
