/**
 * A test cluster's run folder: every one is named with this prefix, so a sweep can find what an
 * interrupted run left; under vitest it names the test run (RT_TEST_RUN_ID, set by the global
 * setup), so one run's end-of-run sweep never touches another run's clusters. Its `owner.json`
 * names the process that made it, so a later run can tell a killed run's folder from a live one.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processIdentity } from '../../../sidecar/src/invoke/registry/local.ts';

export const ANY_RUN_PREFIX = 'rt-kube-run-';
export const RUN_DIR_PREFIX = `${ANY_RUN_PREFIX}${process.env.RT_TEST_RUN_ID ?? 'dev'}-`;
export const OWNER_FILE = 'owner.json';

/** Makes a run folder owned by this process. */
export function makeRunDir(): string {
  const dir = mkdtempSync(join(tmpdir(), RUN_DIR_PREFIX));
  writeFileSync(join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, startTicks: processIdentity('self')?.startTicks }));
  return dir;
}
