/**
 * The temp-folder sweep: what a killed run left (its owner gone) is removed and its server stopped;
 * a folder whose owner lives, a fresh unmarked one and other folders stay.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { markOwner, sweepTempLeftovers } from './temp-sweep.ts';

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function root(): string {
  const r = mkdtempSync(join(tmpdir(), 'rt-sweep-test-'));
  roots.push(r);
  return r;
}

describe('the temp-folder sweep', () => {
  it('removes the folder of a dead owner and stops the server left in it; keeps a live owner\'s, a fresh unmarked one and other folders', async () => {
    const r = root();
    const dead = join(r, 'rt-redis-dead');
    mkdirSync(dead);
    const server = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
    const serverGone = new Promise((done) => server.once('exit', done));
    // the owner: a process that has ended (its pid and start time no longer match a live one)
    const owner = spawnSync(process.execPath, ['-e', `
      const fs = require('node:fs');
      const stat = (pid) => { const s = fs.readFileSync('/proc/' + pid + '/stat', 'utf8'); return s.slice(s.lastIndexOf(')') + 2).split(' ')[19]; };
      fs.writeFileSync(${JSON.stringify(join(dead, '.rt-owner'))}, JSON.stringify({ pid: process.pid, start: stat(process.pid), serverPid: ${server.pid}, serverStart: stat(${server.pid}) }));
    `]);
    expect(owner.status, owner.stderr?.toString()).toBe(0);
    const live = join(r, 'rt-postgres-live');
    mkdirSync(live);
    markOwner(live);
    const unmarked = join(r, 'rt-test-home-unmarked');
    mkdirSync(unmarked);
    const other = join(r, 'rt-something-else');
    mkdirSync(other);
    writeFileSync(join(other, '.rt-owner'), JSON.stringify({ pid: 1, start: 'never' }));
    const said: string[] = [];

    expect(sweepTempLeftovers((s) => said.push(s), r)).toEqual([dead]);
    await vi.waitFor(() => serverGone, { timeout: 5000 });
    expect(server.signalCode).toBe('SIGKILL');
    expect([dead, live, unmarked, other].map(existsSync)).toEqual([false, true, true, true]);
    expect(said.join('\n')).toContain(dead);

    // an unmarked folder (an older checkout's) goes once it is hours old
    expect(sweepTempLeftovers(() => undefined, r, Date.now() + 4 * 3600_000)).toEqual([unmarked]);
    expect(existsSync(live)).toBe(true);
  });
});
