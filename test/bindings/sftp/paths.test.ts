/**
 * fileName confinement: a property over the resolver, and a property against a real sshd that
 * random file names never create, read, list or delete anything outside rootPath.
 */
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SftpBinding } from '../../../sidecar/src/components/bindings/sftp/index.ts';
import { isWithinRoot, normalizeRoot, resolveInRoot } from '../../../sidecar/src/components/bindings/sftp/paths.ts';
import { ApiError } from '../../../sidecar/src/http/errors.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, initBinding, op, sshdAvailable } from './helpers.ts';

/** Path-ish names: the pieces that matter for escapes, joined by slashes. */
const pathPiece = fc.constantFrom('..', '.', '', 'a', 'b', 'outside', 'root', '...', '.. ', '%2e%2e', '\\..', '~', 'x\0y', ' ');
const fileName = fc.oneof(
  fc.array(pathPiece, { minLength: 1, maxLength: 6 }).map((p) => p.join('/')),
  fc.array(pathPiece, { minLength: 1, maxLength: 4 }).map((p) => `/${p.join('/')}`),
  fc.string({ maxLength: 30 }),
);

describe('resolveInRoot', () => {
  it('either throws a 400 or gives a path inside the root', () => {
    fc.assert(
      fc.property(fc.constantFrom('/srv/data', '/', 'relative/root', '/srv/data/'), fileName, fc.boolean(), (rootRaw, name, allowRoot) => {
        const root = normalizeRoot(rootRaw);
        try {
          const r = resolveInRoot(root, name, { allowRoot });
          expect(isWithinRoot(root, r.remote)).toBe(true);
          expect(r.remote).not.toContain('\0');
          expect(posix.normalize(r.remote)).toBe(r.remote);
          if (!allowRoot) expect(r.remote).not.toBe(root);
        } catch (e) {
          expect(e).toBeInstanceOf(ApiError);
          expect((e as ApiError).status).toBe(400);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps harmless ".." and "." inside, refuses escapes, absolute names and NUL', () => {
    expect(resolveInRoot('/srv', 'a/../b.txt').remote).toBe('/srv/b.txt');
    expect(resolveInRoot('/srv', './a//b/').remote).toBe('/srv/a/b');
    expect(resolveInRoot('/', 'a').remote).toBe('/a');
    expect(resolveInRoot('/srv', 'a/..', { allowRoot: true }).remote).toBe('/srv');
    expect(() => resolveInRoot('/srv', '../srv2/x')).toThrow(/outside/);
    expect(() => resolveInRoot('/srv', 'a/../../x')).toThrow(/outside/);
    expect(() => resolveInRoot('/srv', '/srv/x')).toThrow(/absolute/);
    expect(() => resolveInRoot('/srv', 'x\0')).toThrow(/NUL/);
    expect(() => resolveInRoot('/srv', 'x'.repeat(5000))).toThrow(/longer than/);
  });
});

describe.skipIf(!sshdAvailable)('bindings.sftp confinement against a real sshd', () => {
  let s: SshdServer;
  let b: SftpBinding;
  beforeAll(async () => {
    s = await startSshd();
    // a sibling tree the test user may write to: an escape WOULD succeed if it were allowed
    await writeFile(join(s.outside, 'secret.txt'), 'do not touch');
    await s.own(s.outside);
    b = await initBinding(baseMetadata(s));
  });
  afterAll(async () => {
    await b?.close();
    await s?.close();
  });

  /** Every path outside the root, with size and mtime. */
  async function outsideSnapshot(): Promise<string[]> {
    const out: string[] = [];
    for (const entry of await readdir(s.dir, { recursive: true })) {
      if (entry === 'root' || entry.startsWith('root/')) continue;
      const st = await stat(join(s.dir, entry));
      out.push(`${entry} ${st.size} ${st.mtimeMs}`);
    }
    return out.sort();
  }

  it('random fileNames never touch anything outside rootPath', async () => {
    const before = await outsideSnapshot();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('create', 'get', 'list', 'delete'), fileName, async (operation, name) => {
        try {
          await b.invoke(op(operation, { fileName: name }, operation === 'create' ? Buffer.from('escape?').toString('base64') : undefined));
        } catch (e) {
          expect(e).toBeInstanceOf(ApiError);
          // 400: refused before the server; 500: an answer from inside the root (no such file …)
          expect([400, 500]).toContain((e as ApiError).status);
        }
      }),
      { numRuns: 300 },
    );
    expect(await outsideSnapshot()).toEqual(before);
    expect(await readFile(join(s.outside, 'secret.txt'), 'utf8')).toBe('do not touch');
  }, 60_000);
});
