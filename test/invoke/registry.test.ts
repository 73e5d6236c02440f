/**
 * The standalone registry's sweep: an entry whose process is gone (or whose pid another process
 * has taken since) is removed with its socket file, and only a file in rt home's sock folder is
 * ever removed that way; an entry written in another PID namespace is neither listed nor swept.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEntries, processIdentity, register } from '../../sidecar/src/invoke/registry/local.ts';
import { requireService } from '../services/ci.ts';

const LOCAL = join(import.meta.dirname, '..', '..', 'sidecar', 'src', 'invoke', 'registry', 'local.ts');
const entry = { appId: 'x', namespace: 'default', host: '127.0.0.1', httpPort: 1, grpcPort: 2, internalGrpcPort: 3, appPort: 0, appProtocol: 'http', startedAt: new Date().toISOString() };
// a PID namespace of its own (root, or user namespaces): what a container that shares rt home has
const unshare = (script: string) => spawnSync('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
const probe = unshare('process.exit(process.pid === 1 ? 0 : 3)');
const namespaces = requireService('a PID namespace (unshare --pid)', probe.status === 0, probe.error?.message ?? probe.stderr.trim());

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
    register({ ...entry, appId: 'gone', pid: dead, internalSocket: sock }, dir);
    register({ ...entry, appId: 'gone-too', pid: dead, internalGrpcPort: 4, internalSocket: elsewhere }, dir);
    register({ ...entry, appId: 'alive', pid: process.pid, internalGrpcPort: 5 }, dir);

    expect(listEntries(dir).map((e) => e.appId)).toEqual(['alive']);
    expect(existsSync(sock)).toBe(false);
    expect(existsSync(elsewhere)).toBe(true);
  });

  it("writes its process's PID namespace and start time; an entry whose pid another process has taken since is swept", () => {
    const dir = join(home, 'reused');
    const me = processIdentity(process.pid)!;
    expect(me.startTicks).toBeGreaterThan(0);
    expect(me.pidNs).toMatch(/^pid:\[\d+\]$/);
    register({ ...entry, appId: 'alive', pid: process.pid, internalGrpcPort: 5 }, dir);
    const [file] = readdirSync(dir);
    expect(JSON.parse(readFileSync(join(dir, file!), 'utf8'))).toMatchObject({ pidNs: me.pidNs, startTicks: me.startTicks });
    // the same pid, started at another time: the sidecar that wrote it is gone
    register({ ...entry, appId: 'reused', pid: process.pid, internalGrpcPort: 6, pidNs: me.pidNs, startTicks: me.startTicks - 1 }, dir);
    expect(listEntries(dir).map((e) => e.appId)).toEqual(['alive']);
    expect(readdirSync(dir)).toHaveLength(1);
  });

  it.skipIf(!namespaces)('an entry written in another PID namespace (a sidecar as pid 1 in a container that shares rt home) is neither listed nor swept', () => {
    const dir = join(home, 'foreign');
    const r = unshare(`const { register } = await import(${JSON.stringify(LOCAL)}); register({ ...${JSON.stringify(entry)}, appId: 'contained', pid: process.pid }, ${JSON.stringify(dir)});`);
    expect(r.status, r.stderr).toBe(0);
    const written = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8')) as { pid: number; pidNs: string };
    expect(written.pid).toBe(1);
    expect(written.pidNs).not.toBe(processIdentity(process.pid)!.pidNs);
    // pid 1 runs here too (this namespace's init), which is not the sidecar that wrote the entry
    expect(listEntries(dir)).toEqual([]);
    expect(readdirSync(dir)).toHaveLength(1);
  });
});
