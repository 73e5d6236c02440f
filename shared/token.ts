/** Token checks for every server that takes one (the sidecar's APIs, the scheduler's gRPC port). */
import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Constant-time token comparison. Both sides are hashed first so that neither the
 * comparison time nor a length check reveals anything about the expected token.
 */
export function tokenMatches(sent: string, expected: string): boolean {
  const a = createHash('sha256').update(sent).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
