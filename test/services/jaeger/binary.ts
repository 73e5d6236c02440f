/**
 * The Jaeger binary for the tracing suites: built with `go build` from the Go module in
 * test/jaeger (github.com/jaegertracing/jaeger at a pinned release, named there as a `tool`) into
 * the test cache the Kubernetes binaries use (RT_KUBE_CACHE, default ~/.cache/rt-kube), as
 * jaeger/<version>/jaeger, once; later runs reuse it. A file lock keeps two runs (or two vitest
 * workers) from building at once.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildGoProgram, CACHE, goBin } from '../kube/binaries.ts';

const MODULE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'jaeger');
const PACKAGE = 'github.com/jaegertracing/jaeger/cmd/jaeger';

/** The github.com/jaegertracing/jaeger release test/jaeger pins, e.g. v1.76.0 (Jaeger v2, built on the OTel collector). */
export function jaegerVersion(): string {
  const file = join(MODULE_DIR, 'go.mod');
  const m = /^\s*(?:require\s+)?github\.com\/jaegertracing\/jaeger (v\d+\.\d+\.\d+)/m.exec(readFileSync(file, 'utf8'));
  if (!m) throw new Error(`no github.com/jaegertracing/jaeger version in ${file}`);
  return m[1];
}

export const jaegerPath = () => process.env.RT_TEST_JAEGER_BIN || join(CACHE, 'jaeger', jaegerVersion(), 'jaeger');

/** Why Jaeger can neither be found nor built here, or undefined. */
export function jaegerUnavailable(): string | undefined {
  if (existsSync(jaegerPath())) return undefined;
  if (!goBin()) return 'Go is not installed, so Jaeger cannot be built (and none is cached)';
  if (!existsSync('/usr/bin/flock')) return 'flock is missing (Debian package util-linux)';
  return undefined;
}

/** Builds Jaeger into the cache when it is not there yet; returns its path. */
export async function ensureJaeger(log: (s: string) => void = () => {}): Promise<string> {
  const out = jaegerPath();
  if (process.env.RT_TEST_JAEGER_BIN && !existsSync(out)) throw new Error(`RT_TEST_JAEGER_BIN=${out} does not exist`);
  // its own lock: it need not wait for the Kubernetes build, which the global setup runs beside it
  return buildGoProgram({ name: 'Jaeger', version: jaegerVersion(), moduleDir: MODULE_DIR, pkg: PACKAGE, out, lock: 'jaeger-build' }, log);
}
