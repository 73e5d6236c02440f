/**
 * A resource id becomes the lock store's key as the reference runtime makes it, so that sidecars
 * of both kinds sharing one store contend for the same keys. Lock store metadata `keyPrefix`
 * (read in lower case, as there): `appid` (default) → `lock||<appId>||<resourceId>` (or
 * `lock||<resourceId>` without an app id), `name` → `lock||<store name>||<resourceId>`, `none`
 * → `lock||<resourceId>`, any other text → `lock||<text>||<resourceId>`.
 */
import { LOCK_KEY_SEPARATOR as SEP } from '../components/lock/metadata.ts';

const API_PREFIX = 'lock';

/** The part between `lock||` and the resource id ('' for none), from the store's keyPrefix. */
export function lockKeyPrefix(keyPrefix: string, storeName: string, appId: string): string {
  const strategy = keyPrefix.toLowerCase();
  switch (strategy) {
    case '':
    case 'appid':
      return appId ? appId + SEP : '';
    case 'name':
      return storeName + SEP;
    case 'none':
      return '';
    default:
      return strategy + SEP;
  }
}

/** The store's key of a resource id (the caller has checked the id has no separator). */
export function lockKey(prefix: string, resourceId: string): string {
  return `${API_PREFIX}${SEP}${prefix}${resourceId}`;
}
