/**
 * The dependencies whose files the build rewrites, and the V8 internals the `rt` command relies on
 * (images/patched-dependencies.ts), are the versions they were checked against. A new version
 * fails here, loudly, instead of the rewrite breaking or losing its effect without a word.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PATCHED_DEPENDENCIES } from '../../images/patched-dependencies.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const require = createRequire(join(ROOT, 'package.json'));

/** The installed version: the package's package.json, or V8's major.minor for `node`. */
function installed(name: string): string {
  if (name === 'node') return process.versions.v8.split('.').slice(0, 2).join('.');
  return (JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string }).version;
}

describe('dependencies relied on beyond what they publish (images/patched-dependencies.ts)', () => {
  for (const [name, { version, what }] of Object.entries(PATCHED_DEPENDENCIES)) {
    it(`${name} is ${version}, the version checked`, () => {
      const now = installed(name);
      expect(
        now,
        `${name} is now ${now}; rt relies on ${name} ${version} beyond what it publishes: ${what}. ` +
          'Check that this still holds in the new version, run `npm run bench -- startup`, then update or drop the entry in images/patched-dependencies.ts',
      ).toBe(version);
    });
  }

  it('names every dependency whose files images/bundle.ts rewrites', () => {
    const bundle = readFileSync(join(ROOT, 'images', 'bundle.ts'), 'utf8');
    // `from: '<pkg>/…'` (LAZY) and the file patterns of the other rewrites
    const rewritten = new Set([
      ...[...bundle.matchAll(/\bfrom: '((?:@[^/']+\/)?[^/']+)\//g)].map((m) => m[1]!),
      ...[...bundle.matchAll(/^\s*\[?\s*\/((?:@[\w-]+\\\/)?[\w-]+)\\\/(?:lib|built)\\\//gm)].map((m) => m[1]!.replace('\\/', '/')),
      ...[...bundle.matchAll(/filter: \/((?:@[\w-]+\\\/)?[\w-]+)\\\/lib\\\//g)].map((m) => m[1]!.replace('\\/', '/')),
    ]);
    expect([...rewritten].sort()).toEqual(['fastify', 'ioredis', 'prom-client', 'undici']);
    for (const pkg of rewritten) expect(Object.keys(PATCHED_DEPENDENCIES)).toContain(pkg);
  });
});
