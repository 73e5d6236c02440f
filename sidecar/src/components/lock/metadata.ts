/**
 * What the distributed lock building block reads from every lock store's metadata: `keyPrefix`,
 * how a resource id becomes the store's key (sidecar/src/lock/keys.ts). Spread into each lock
 * store's declaration, so that the operator and the docs see it with the store's own fields.
 */
import { defineMetadata, metadataFields, MetadataError, type MetadataRule } from '../metadata/decode.ts';

export const LOCK_KEY_SEPARATOR = '||';

export const LOCK_STORE_FIELDS = metadataFields({
  keyPrefix: { type: 'string', default: 'appid', doc: 'appid (default): lock||<app id>||<resource>; name: lock||<store name>||<resource>; none: lock||<resource>; other text: lock||<text>||<resource>' },
});

/** A keyPrefix with the separator in it would let two prefixes make the same key. */
export const KEY_PREFIX_RULE: MetadataRule = (md) => {
  const found = Object.entries(md).find(([k]) => k.toLowerCase() === 'keyprefix');
  if (found && found[1].includes(LOCK_KEY_SEPARATOR)) throw new MetadataError('keyPrefix', `"${found[1]}" must not contain "${LOCK_KEY_SEPARATOR}"`);
};

export const LOCK_STORE_METADATA = defineMetadata('lock.*', LOCK_STORE_FIELDS, [KEY_PREFIX_RULE]);
