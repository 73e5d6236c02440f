/** Where rt keeps a user's files (the local registry, data dirs, the local CA): RT_HOME, or ~/.rt. */
import { homedir } from 'node:os';
import { join } from 'node:path';

/** rt's per-user home: RT_HOME, or ~/.rt. */
export function rtHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.RT_HOME || join(homedir(), '.rt');
}
