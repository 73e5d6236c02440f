/**
 * The data-dir lock of the embedded workflow store: one holder at a time (in this process or
 * another), given back on release, and free the moment a holder is killed with -9.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lockFileWithin, tryLockFile } from '../../sidecar/src/workflows/data-dir-lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'rt-wf-lock-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Another process that takes the lock, says so, and holds it until killed. */
async function holderProcess(path: string): Promise<ChildProcess> {
  const code = `const { tryLockFile } = await import(${JSON.stringify(new URL('../../sidecar/src/workflows/data-dir-lock.ts', import.meta.url).href)});
    const release = await tryLockFile(${JSON.stringify(path)});
    process.stdout.write(release ? 'held\\n' : 'busy\\n');
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const said = await new Promise<string>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (c) => reject(new Error(`holder exited with ${c}`)));
  });
  expect(said).toBe('held');
  return child;
}

describe('data-dir lock', () => {
  it('has one holder in a process, and is free again after release', async () => {
    const path = join(dir, 'a', 'workflows-x.owner');
    const release = await tryLockFile(path);
    expect(release).toBeTypeOf('function');
    expect(await tryLockFile(path)).toBeUndefined();
    release!();
    release!(); // twice is harmless
    const again = await tryLockFile(path);
    expect(again).toBeTypeOf('function');
    again!();
  });

  it('is busy while another process holds it, and free as soon as that process is killed with -9', async () => {
    const path = join(dir, 'b.owner');
    const holder = await holderProcess(path);
    expect(await tryLockFile(path)).toBeUndefined();
    await new Promise<void>((r) => {
      holder.once('exit', () => r());
      holder.kill('SIGKILL');
    });
    const mine = await tryLockFile(path);
    expect(mine).toBeTypeOf('function');
    mine!();
  });

  it('waits for a holder that goes away, and gives up on one that stays', async () => {
    const path = join(dir, 'c.owner');
    const holder = await holderProcess(path);
    const t0 = Date.now();
    expect(await lockFileWithin(path, 300)).toBeUndefined();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    let waited = false;
    // the holder goes away once the second one waits for it
    const mine = await lockFileWithin(path, 10_000, () => {
      waited = true;
      holder.kill('SIGKILL');
    });
    expect(mine).toBeTypeOf('function');
    expect(waited).toBe(true);
    mine!();
  });
});
