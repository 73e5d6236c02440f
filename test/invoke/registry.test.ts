/**
 * The standalone registry's sweep: an entry whose process is gone is removed with its socket
 * file, and only a file in rt home's sock folder is ever removed that way.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEntries, register } from '../../sidecar/src/invoke/registry/local.ts';

describe('standalone registry sweep', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'rt-invoke-registry-'));
  });
  afterAll(() => rm(home, { recursive: true, force: true }));

  it("removes a dead sidecar's entry and its socket file, and nothing outside the sock folder", () => {
    const dir = join(home, 'registry');
    mkdirSync(join(home, 'sock'), { recursive: true });
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!; // a pid whose process has exited
    const sock = join(home, 'sock', 'gone-1-2.sock');
    const elsewhere = join(home, 'not-a-socket.sock');
    for (const f of [sock, elsewhere]) writeFileSync(f, '');
    const entry = { appId: 'gone', namespace: 'default', host: '127.0.0.1', httpPort: 1, grpcPort: 2, internalGrpcPort: 3, appPort: 0, appProtocol: 'http', startedAt: new Date().toISOString() };
    register({ ...entry, pid: dead, internalSocket: sock }, dir);
    register({ ...entry, appId: 'gone-too', pid: dead, internalGrpcPort: 4, internalSocket: elsewhere }, dir);
    register({ ...entry, appId: 'alive', pid: process.pid, internalGrpcPort: 5 }, dir);

    expect(listEntries(dir).map((e) => e.appId)).toEqual(['alive']);
    expect(existsSync(sock)).toBe(false);
    expect(existsSync(elsewhere)).toBe(true);
  });
});
