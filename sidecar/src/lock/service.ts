/**
 * The distributed lock building block for both API surfaces (HTTP routes.ts, gRPC
 * grpc/runtime/lock.ts): one operation each for taking and releasing a lock. It checks the
 * request (a resource id and an owner, an expiry above 0), finds the store (400 listing the
 * loaded ones), makes the store's key (keys.ts) and maps store failures to the error table's
 * rows; the transports only decode and encode. Store calls run under the store's outbound
 * resiliency policy when one applies (componentCall).
 */
import { ERRORS, fail, failAs } from '../api/errors.ts';
import { LOCK_KEY_SEPARATOR, LOCK_STORE_METADATA } from '../components/lock/metadata.ts';
import { isLockStore, type LockStore, type UnlockStatus } from '../components/lock/types.ts';
import { decodeMetadata } from '../components/metadata/decode.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { ComponentSpec } from '../components/types.ts';
import { ApiError, errorMessage, malformed } from '../http/errors.ts';
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';
import { lockKey, lockKeyPrefix } from './keys.ts';

/** The largest expiry the wire carries (an int32 in the reference's protos). */
export const MAX_EXPIRY_SECONDS = 2_147_483_647;

export interface LockRequest {
  resourceId: string;
  lockOwner: string;
  expiryInSeconds: number;
}

export type UnlockRequest = Omit<LockRequest, 'expiryInSeconds'>;

export class LockService {
  private readonly components: ComponentRegistry;
  private readonly appId: string;
  /** Each loaded store's key prefix, read once from its spec. */
  private readonly prefixes = new WeakMap<ComponentSpec, string>();
  private readonly resiliency?: ResiliencyService;

  constructor(components: ComponentRegistry, appId: string, resiliency?: ResiliencyService) {
    this.components = components;
    this.appId = appId;
    this.resiliency = resiliency;
  }

  /** Takes the lock on the resource for `lockOwner` when nobody holds it: `{success}` says whether it did. */
  async tryLock(storeName: string, req: LockRequest): Promise<{ success: boolean }> {
    checkRequest(storeName, req);
    if (!Number.isInteger(req.expiryInSeconds) || req.expiryInSeconds <= 0 || req.expiryInSeconds > MAX_EXPIRY_SECONDS) {
      throw malformed(`"expiryInSeconds" must be a whole number of seconds from 1 to ${MAX_EXPIRY_SECONDS} (lock store "${clip(storeName)}"); got ${String(req.expiryInSeconds).slice(0, 40)}`);
    }
    const { store, key } = this.target(storeName, req.resourceId);
    try {
      return { success: await componentCall(this.resiliency, this.components, storeName, 'Outbound', () => store.tryLock({ key, lockOwner: req.lockOwner, expiryInSeconds: req.expiryInSeconds })) };
    } catch (e) {
      throw failed('ERR_TRY_LOCK', `failed to try acquiring lock "${clip(req.resourceId)}" in lock store "${storeName}"`, e);
    }
  }

  /** Releases the lock when `lockOwner` holds it; the status says what was found. */
  async unlock(storeName: string, req: UnlockRequest): Promise<{ status: UnlockStatus }> {
    checkRequest(storeName, req);
    const { store, key } = this.target(storeName, req.resourceId);
    try {
      return { status: await componentCall(this.resiliency, this.components, storeName, 'Outbound', () => store.unlock({ key, lockOwner: req.lockOwner })) };
    } catch (e) {
      throw failed('ERR_UNLOCK', `failed to release lock "${clip(req.resourceId)}" in lock store "${storeName}"`, e);
    }
  }

  private target(storeName: string, resourceId: string): { store: LockStore; key: string } {
    const loaded = storeName ? this.components.get(storeName) : undefined;
    if (!loaded || !isLockStore(loaded.instance)) {
      const loadedNames = this.components.namesOf('lock');
      throw fail(ERRORS.LOCK_STORE_NOT_FOUND, `lock store "${clip(storeName)}" is not found; loaded lock stores: ${loadedNames.join(', ') || 'none'}${this.components.notLoadedNote(storeName)}`);
    }
    let prefix = this.prefixes.get(loaded.spec);
    if (prefix === undefined) {
      prefix = lockKeyPrefix(decodeMetadata(LOCK_STORE_METADATA, loaded.spec.metadata).keyPrefix, storeName, this.appId);
      this.prefixes.set(loaded.spec, prefix);
    }
    return { store: loaded.instance, key: lockKey(prefix, resourceId) };
  }
}

function checkRequest(storeName: string, req: UnlockRequest): void {
  if (typeof req.resourceId !== 'string' || req.resourceId === '') throw malformed(`"resourceId" is required: the resource to lock (lock store "${clip(storeName)}")`);
  if (typeof req.lockOwner !== 'string' || req.lockOwner === '') throw malformed(`"lockOwner" is required: who holds the lock, unique per holder (lock store "${clip(storeName)}")`);
  if (req.resourceId.includes(LOCK_KEY_SEPARATOR)) throw malformed(`"resourceId" "${clip(req.resourceId)}" must not contain "${LOCK_KEY_SEPARATOR}"`);
  // the store keeps them as UTF-8: a lone surrogate would not come back as sent
  if (!req.resourceId.isWellFormed() || !req.lockOwner.isWellFormed()) throw malformed('"resourceId" and "lockOwner" must be valid Unicode text');
}

function failed(code: string, what: string, e: unknown): ApiError {
  return e instanceof ApiError ? e : failAs(ERRORS.LOCK_FAILED, code, `${what}: ${errorMessage(e)}`);
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
