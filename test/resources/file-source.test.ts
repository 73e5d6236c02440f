/**
 * The file source's re-reads against a writer that is not atomic: a read that overlaps a change is
 * dropped, so a file caught half-written (truncated, not yet written) never reaches the sidecar as
 * "no components", and an older read never lands after a newer one. The file system is real; the
 * test only holds a read open (a gate in list()) to make the overlap happen every time.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileSource } from '../../sidecar/src/resources/file-source.ts';
import type { Resources } from '../../sidecar/src/resources/types.ts';

const silent = pino({ level: 'silent' });
const comp = (name: string) => stringify({ apiVersion: 'rt.io/v1alpha1', kind: 'Component', metadata: { name }, spec: { type: 'state.in-memory', version: 'v1', metadata: [] } });

/** A FileSource whose reads can be held after they have read the files, until released. */
class HeldSource extends FileSource {
  hold = false;
  readonly held: (() => void)[] = [];
  /** Every read, in order. */
  readonly reads: Promise<Resources>[] = [];
  override list(): Promise<Resources> {
    const read = (async () => {
      const r = await super.list();
      if (this.hold) await new Promise<void>((release) => this.held.push(release));
      return r;
    })();
    this.reads.push(read);
    return read;
  }
}

/** Resolves once the source has decided about `read`'s result (it decides in the check phase after the read). */
async function decided(read: Promise<Resources>): Promise<void> {
  await read;
  await new Promise((r) => setImmediate(r));
}

describe('file source re-reads', () => {
  let dir: string;
  let file: string;
  let source: HeldSource;
  const applied: string[][] = [];
  const names = (r: Resources) => r.components.map((c) => c.spec.name);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-filesrc-'));
    file = join(dir, 'components.yaml');
    await writeFile(file, comp('store'));
    applied.length = 0;
    source = new HeldSource([dir], { appId: 'a', namespace: 'default' }, silent);
    source.watch((r) => applied.push(names(r)));
    // the read made once the watch is in place
    await vi.waitFor(() => expect(applied).toEqual([['store']]), { timeout: 5_000 });
    applied.length = 0;
  });

  afterEach(async () => {
    source.hold = false;
    for (const release of source.held.splice(0)) release();
    await source.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a read that caught the file truncated is dropped when the write lands meanwhile; the settled file is applied', async () => {
    source.hold = true;
    await writeFile(file, ''); // a writer's truncate; its write follows below
    await vi.waitFor(() => expect(source.held.length).toBe(1), { timeout: 5_000 }); // the empty file has been read
    await writeFile(file, comp('store') + '---\n' + comp('second'));
    await new Promise((r) => setTimeout(r, 50)); // the write's change event is seen
    source.hold = false;
    source.held.splice(0)[0]?.();
    await vi.waitFor(() => expect(applied.at(-1)).toEqual(['store', 'second']), { timeout: 5_000 });
    expect(applied).toEqual([['store', 'second']]);
  });

  it('an older read that finishes after a newer change is not applied over it', async () => {
    source.hold = true;
    await writeFile(file, comp('old'));
    await vi.waitFor(() => expect(source.held.length).toBe(1), { timeout: 5_000 });
    const old = source.reads.at(-1)!;
    source.hold = false;
    await writeFile(file, comp('new'));
    await vi.waitFor(() => expect(applied).toEqual([['new']]), { timeout: 5_000 });
    source.held.splice(0)[0]?.(); // the read of "old" finishes last
    await decided(old);
    expect(applied).toEqual([['new']]);
  });

  it('a file emptied on purpose (no change after it) removes its components', async () => {
    await writeFile(file, '');
    await vi.waitFor(() => expect(applied).toEqual([[]]), { timeout: 5_000 });
  });
});
