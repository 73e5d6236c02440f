/**
 * TryLockAlpha1 and UnlockAlpha1 on the lock block's service, which the HTTP API uses too
 * (lock/service.ts): it checks the request, finds the store and answers with the error table's
 * rows; here the messages are only decoded and encoded. The unlock status goes out as the
 * enum's number (the loader's `enums: Number`).
 */
import type { UnlockStatus } from '../../components/lock/types.ts';
import type { LockService } from '../../lock/service.ts';

export interface TryLockRequest {
  store_name: string;
  resource_id: string;
  lock_owner: string;
  expiry_in_seconds: number;
}

export function lockMethods(lock: LockService) {
  return {
    async TryLockAlpha1(req: TryLockRequest): Promise<{ success: boolean }> {
      return lock.tryLock(req.store_name, { resourceId: req.resource_id, lockOwner: req.lock_owner, expiryInSeconds: req.expiry_in_seconds });
    },

    async UnlockAlpha1(req: Omit<TryLockRequest, 'expiry_in_seconds'>): Promise<{ status: UnlockStatus }> {
      return lock.unlock(req.store_name, { resourceId: req.resource_id, lockOwner: req.lock_owner });
    },
  };
}
