/**
 * Every built-in component's metadata declaration, by type: what the operator checks a Component
 * by (operator/src/check.ts) and what the docs' field tables are tested against
 * (test/components/metadata-docs.test.ts). Each declaration lives in a light module beside its
 * component (no SDK, no component code). The sidecar does not import this index: each component
 * reads its own declaration when the catalog loads it.
 */
import { METADATA as eventRouter } from '../bindings/eventgrid/metadata.ts';
import { METADATA as bindingsMqtt3 } from '../bindings/mqtt3/metadata.ts';
import { METADATA as bindingsRedis } from '../bindings/redis/metadata.ts';
import { METADATA as sftp } from '../bindings/sftp/metadata.ts';
import { ComponentCatalog } from '../catalog.ts';
import { METADATA as configurationPostgresql } from '../configuration/postgresql/metadata.ts';
import { METADATA as configurationRedis } from '../configuration/redis/metadata.ts';
import { METADATA as cryptoJwks } from '../crypto/jwks/metadata.ts';
import { METADATA as cryptoLocalStorage } from '../crypto/localstorage/metadata.ts';
import { METADATA as lockRedis } from '../lock/redis/metadata.ts';
import { METADATA as pubsubMqtt3 } from '../pubsub/mqtt3/metadata.ts';
import { METADATA as pubsubRedis } from '../pubsub/redis/metadata.ts';
import { METADATA as localEnv } from '../secretstores/local.env/index.ts';
import { METADATA as localFile } from '../secretstores/local.file/index.ts';
import { STATE_STORE_METADATA } from '../state/metadata.ts';
import { METADATA as postgresql } from '../state/postgresql/metadata.ts';
import { METADATA as redis } from '../state/redis/metadata.ts';
import { METADATA as sqlite } from '../state/sqlite/metadata.ts';
import type { Fields, MetadataDeclaration } from './decode.ts';

/** The built-in components' own declarations (the runtime's fields of every state store apart). */
export const DECLARATIONS: readonly MetadataDeclaration<Fields>[] = [eventRouter, configurationPostgresql, configurationRedis, sftp, bindingsRedis, lockRedis, cryptoLocalStorage, cryptoJwks, bindingsMqtt3, pubsubMqtt3, pubsubRedis, localEnv, localFile, postgresql, redis, sqlite];

const BY_TYPE = new Map(DECLARATIONS.flatMap((d) => d.types.map((t) => [t, d] as const)));

/**
 * The declarations a Component of `type` is decoded by, in the sidecar's order: the runtime's
 * fields of a state store (built-in or pluggable) first, then the built-in component's own.
 * Empty for a type that reads no declared metadata.
 */
export function declarationsOf(type: string): MetadataDeclaration<Fields>[] {
  const own = BY_TYPE.get(type);
  return [...(ComponentCatalog.categoryOf(type) === 'state' ? [STATE_STORE_METADATA] : []), ...(own ? [own] : [])];
}
