/**
 * What a lock store offers the distributed lock building block (sidecar/src/lock/): a lease on
 * a resource held by one owner until it is released by that owner or expires.
 */
import type { Component } from '../types.ts';

/** The answers of an unlock, numbered as the reference runtime's UnlockResponse.Status. */
export const UNLOCK_STATUS = { SUCCESS: 0, LOCK_DOES_NOT_EXIST: 1, LOCK_BELONGS_TO_OTHERS: 2, INTERNAL_ERROR: 3 } as const;
export type UnlockStatus = (typeof UNLOCK_STATUS)[keyof typeof UNLOCK_STATUS];

export interface TryLockRequest {
  /** The store's key for the resource (the building block has added its prefix). */
  key: string;
  lockOwner: string;
  /** > 0. */
  expiryInSeconds: number;
}

export interface UnlockRequest {
  key: string;
  lockOwner: string;
}

export interface LockStore extends Component {
  /** true when the lock was free and is now held by `lockOwner`; false when someone holds it. */
  tryLock(req: TryLockRequest): Promise<boolean>;
  /** Releases the lock only when `lockOwner` holds it; says which case it was. */
  unlock(req: UnlockRequest): Promise<UnlockStatus>;
}

export function isLockStore(c: Component | undefined): c is LockStore {
  return typeof (c as Partial<LockStore> | undefined)?.tryLock === 'function' && typeof (c as Partial<LockStore>).unlock === 'function';
}
