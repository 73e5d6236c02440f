/**
 * The private Docker engine (test/services/docker.ts) is shared by suites running at once and
 * ended by the last of them, leaving no process, mount or run folder. Run here on its own run and
 * cache folders (RT_DOCKER_RUN / RT_DOCKER_CACHE), so it neither waits for nor disturbs the engine
 * other suites share.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireService } from '../services/ci.ts';
import { dockerMissing } from '../services/docker.ts';

const missing = process.env.DOCKER_HOST ? 'DOCKER_HOST names another engine' : dockerMissing();
const available = requireService('dockerd', !missing, missing);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const mountsUnder = (dir: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.split(' ')[4]?.startsWith(dir));

describe.skipIf(!available)('the shared private dockerd', () => {
  const run = `/tmp/rt-docker-test-${process.pid}`;
  const cache = mkdtempSync(join(tmpdir(), 'rt-docker-cache-'));
  let docker: typeof import('../services/docker.ts');

  beforeAll(async () => {
    process.env.RT_DOCKER_RUN = run;
    process.env.RT_DOCKER_CACHE = cache;
    // a module instance of its own, reading the folders above
    vi.resetModules();
    docker = await import('../services/docker.ts');
  });

  afterAll(async () => {
    delete process.env.RT_DOCKER_RUN;
    delete process.env.RT_DOCKER_CACHE;
    await docker?.stopDockerIfUnused().catch(() => false);
    rmSync(cache, { recursive: true, force: true });
    rmSync(run, { recursive: true, force: true });
  }, 60_000);

  it('serves two users with one engine, and the last stop ends it and its mounts', async () => {
    const a = await docker.startDocker();
    const b = await docker.startDocker();
    expect(b.socket).toBe(a.socket);
    const pid = Number(readFileSync(join(run, 'dockerd.pid'), 'utf8'));
    expect(alive(pid)).toBe(true);
    expect((await a.docker(['version', '--format', '{{.Server.Version}}'], { check: true })).stdout.trim()).toMatch(/^\d+\.\d+/);

    await a.stop();
    expect(alive(pid)).toBe(true);
    expect((await b.docker(['info', '--format', '{{.Driver}}'], { check: true })).code).toBe(0);

    await b.stop();
    expect(alive(pid)).toBe(false);
    expect(existsSync(run)).toBe(false);
    expect(mountsUnder(run)).toEqual([]);
    expect(mountsUnder(cache)).toEqual([]);
  }, 120_000);

  it('does not stay up for a user that died without stopping it', async () => {
    const d = await docker.startDocker();
    const pid = Number(readFileSync(join(run, 'dockerd.pid'), 'utf8'));
    // a user whose process is gone (as a suite killed halfway leaves it)
    const dead = spawnSync('true').pid!;
    writeFileSync(join(run, 'users', `${dead}-deadbeef`), '');
    expect(await docker.stopDockerIfUnused()).toBe(false); // we are still using it
    await d.stop();
    expect(alive(pid)).toBe(false);
    expect(existsSync(run)).toBe(false);
  }, 120_000);

  it('a teardown ends an engine whose users all died', async () => {
    const d = await docker.startDocker();
    const pid = Number(readFileSync(join(run, 'dockerd.pid'), 'utf8'));
    // forget our own registration, as a process that died would
    rmSync(join(run, 'users'), { recursive: true, force: true });
    expect(await docker.stopDockerIfUnused()).toBe(true);
    expect(alive(pid)).toBe(false);
    expect(existsSync(run)).toBe(false);
    await d.stop(); // nothing left to do
  }, 120_000);
});
