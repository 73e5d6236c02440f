/**
 * Rules every built-in state store shares: how TTL metadata is read, what an etag of ours
 * looks like, the first-write/etag check, and which features show as capabilities.
 */
import type { StateDeleteRequest, StateFeature, StateSetRequest } from '../types.ts';
import { EtagInvalidError, EtagMismatchError, StateRequestError } from './errors.ts';

/** Longest TTL accepted (a 32-bit second count, as the ecosystem's stores take). */
export const MAX_TTL_SECONDS = 2_147_483_647;

/**
 * `ttlInSeconds` request metadata: a positive integer expires the item after that many
 * seconds; absent, empty, 0 or -1 = never expires. Anything else is a bad request.
 */
export function ttlSeconds(metadata: Record<string, string> | undefined): number | undefined {
  const raw = metadata?.ttlInSeconds;
  if (raw === undefined || raw === '') return undefined;
  if (!/^-?\d{1,10}$/.test(raw.trim())) throw new StateRequestError(`metadata ttlInSeconds "${raw.slice(0, 40)}" is not an integer`);
  const n = Number(raw.trim());
  if (n < -1) throw new StateRequestError(`metadata ttlInSeconds must be -1 (no expiry) or greater, got ${n}`);
  if (n > MAX_TTL_SECONDS) throw new StateRequestError(`metadata ttlInSeconds must be at most ${MAX_TTL_SECONDS}`);
  return n > 0 ? n : undefined;
}

const ETAG = /^[1-9][0-9]{0,15}$/;

/**
 * The etag a request carries: undefined when none (an empty string counts as none, as in
 * the ecosystem). The built-in stores' etags are decimal version numbers; anything else
 * cannot be one of ours → EtagInvalidError.
 */
export function requestEtag(req: StateSetRequest | StateDeleteRequest): string | undefined {
  const e = req.etag;
  if (e === undefined || e === null || e === '') return undefined;
  if (typeof e !== 'string' || !ETAG.test(e)) throw new EtagInvalidError(req.key);
  return e;
}

/**
 * Where the reference stores differ in their etag rules, each of ours follows its counterpart
 * (docs/state.md has the table), so an application moved onto rt sees the same answers.
 */
export interface EtagRules {
  /**
   * An etag sent for a key that does not exist: a mismatch (in-memory, SQLite, PostgreSQL), or
   * accepted — the write creates it, the delete is a no-op (Redis: a key with no version yet
   * takes any etag).
   */
  etagOnMissingKey: 'mismatch' | 'accept';
  /** first-write without an etag refuses to delete a live item (in-memory only; the SQL stores and Redis delete). */
  firstWriteGuardsDelete: boolean;
}

/** The reference in-memory store's rules. */
export const IN_MEMORY_ETAG_RULES: EtagRules = { etagOnMissingKey: 'mismatch', firstWriteGuardsDelete: true };
/** The reference SQLite and PostgreSQL stores' rules (an etag is a condition of UPDATE/DELETE). */
export const SQL_ETAG_RULES: EtagRules = { etagOnMissingKey: 'mismatch', firstWriteGuardsDelete: false };
/** The reference Redis store's rules (its Lua scripts). */
export const REDIS_ETAG_RULES: EtagRules = { etagOnMissingKey: 'accept', firstWriteGuardsDelete: false };

/**
 * The concurrency check before a write or delete, given the etag of the live item (undefined
 * when absent or expired):
 * - an etag sent must equal the stored one (an absent item: as `rules.etagOnMissingKey`);
 * - first-write without an etag only writes when no live item exists (and only deletes when
 *   none exists, if `rules.firstWriteGuardsDelete`).
 */
export function checkConcurrency(req: StateSetRequest | StateDeleteRequest, etag: string | undefined, current: string | undefined, rules: EtagRules = IN_MEMORY_ETAG_RULES, isDelete = false): void {
  if (etag !== undefined) {
    if (current === undefined) {
      if (rules.etagOnMissingKey === 'accept') return;
      throw new EtagMismatchError(req.key, `etag mismatch for key "${req.key}": the item does not exist`);
    }
    if (current !== etag) throw new EtagMismatchError(req.key);
    return;
  }
  if (req.options?.concurrency === 'first-write' && current !== undefined && (!isDelete || rules.firstWriteGuardsDelete)) {
    throw new EtagMismatchError(req.key, `key "${req.key}" already exists and no etag was sent (first-write)`);
  }
}

/** Capability strings of the metadata API for a store's features (contract table). */
export function capabilitiesOf(features: StateFeature[]): string[] {
  const shown: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'ACTOR', 'QUERY_API'];
  return shown.filter((f) => features.includes(f));
}

/** Features plus ACTOR, which a store earns by having both etags and transactions. */
export function withActor(features: StateFeature[]): StateFeature[] {
  return features.includes('ETAG') && features.includes('TRANSACTIONAL') && !features.includes('ACTOR') ? [...features, 'ACTOR'] : features;
}

/** A plain SQL identifier for table names from metadata (no quoting games, no injection). */
export function sqlIdentifier(name: string, what: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new Error(`metadata ${what} "${name}" must be letters, digits and '_' (at most 63), starting with a letter or '_'`);
  return name;
}

/** The bytes of a value as a Buffer without copying when it already is one. */
export function asBuffer(v: Uint8Array): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}
