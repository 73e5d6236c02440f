/**
 * `--wait-for-sockets a,b`: on a cluster without native sidecars the component containers start
 * beside the runtime, so the runtime waits (bounded) for the sockets it was told to expect
 * before it discovers components, instead of racing them.
 */
import type { Logger } from 'pino';
import { listSocketFiles } from './discovery.ts';

/** How long the runtime waits for expected sockets before it goes on without them. */
export const WAIT_FOR_SOCKETS_MS = 60_000;
const POLL_MS = 100;

/** Resolves with the socket names still missing at the deadline (empty: all are there). */
export async function waitForSockets(folder: string, names: string[], log: Logger, timeoutMs = WAIT_FOR_SOCKETS_MS): Promise<string[]> {
  if (names.length === 0) return [];
  const deadline = Date.now() + timeoutMs;
  let missing = names;
  let told = false;
  for (;;) {
    const present = new Set((await listSocketFiles(folder)).map((f) => f.name));
    missing = names.filter((n) => !present.has(n));
    if (missing.length === 0) return [];
    const left = deadline - Date.now();
    if (left <= 0) break;
    if (!told) {
      log.info({ folder, missing }, `waiting for pluggable component sockets: ${missing.join(', ')}`);
      told = true;
    }
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, left)));
  }
  log.warn({ folder, missing }, `pluggable component sockets did not appear within ${timeoutMs} ms: ${missing.join(', ')}; starting without them`);
  return missing;
}
