/**
 * Docker-built images reach a kubelet through containerd: `docker save | ctr images import` into
 * the k8s.io namespace (importIntoContainerd), against Debian's containerd started here in a
 * temporary folder with the CRI plugin on, as the node runs it.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { dockerMissing, startDocker, type Docker } from '../services/docker.ts';
import { buildPauseImage, containerdRef, importIntoContainerd } from '../services/images.ts';

const CONTAINERD = ['/usr/bin/containerd', '/usr/sbin/containerd'].find((p) => existsSync(p));
const missing = dockerMissing() || (CONTAINERD && existsSync('/usr/bin/ctr') ? '' : 'containerd/ctr not found (install the containerd package)');
const available = requireService('docker and containerd', !missing, missing);

describe.skipIf(!available)('importing a Docker image into containerd', () => {
  let d: Docker;
  let dir = '';
  let socket = '';
  let containerd: ChildProcess | undefined;
  let pause = '';

  beforeAll(async () => {
    d = await startDocker();
    pause = await buildPauseImage(d);
    dir = mkdtempSync(join(tmpdir(), 'rt-containerd-'));
    socket = join(dir, 'containerd.sock');
    writeFileSync(
      join(dir, 'config.toml'),
      `version = 2\nroot = "${dir}/root"\nstate = "${dir}/state"\n[grpc]\n  address = "${socket}"\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "${pause}"\n`,
    );
    containerd = spawn(CONTAINERD!, ['--config', join(dir, 'config.toml')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    containerd.stderr?.on('data', (b: Buffer) => (log = (log + b.toString()).slice(-3000)));
    const deadline = Date.now() + 30_000;
    while (!existsSync(socket)) {
      if (containerd.exitCode !== null || Date.now() > deadline) throw new Error(`containerd did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 10 * 60_000);

  afterAll(async () => {
    if (containerd && containerd.exitCode === null) {
      containerd.kill('SIGTERM');
      await new Promise((r) => containerd!.once('exit', r));
    }
    if (dir) {
      const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]).filter((m) => m?.startsWith(dir));
      for (const m of mounts.reverse()) execFileSync('umount', ['-l', m!]);
      rmSync(dir, { recursive: true, force: true });
    }
    await d?.stop();
  }, 60_000);

  it('names images as the kubelet asks for them', () => {
    expect(containerdRef('rt:dev')).toBe('docker.io/library/rt:dev');
    expect(containerdRef('rt-pause:1')).toBe('docker.io/library/rt-pause:1');
    expect(containerdRef('someone/rt:1')).toBe('docker.io/someone/rt:1');
    expect(containerdRef('localhost:5000/rt:1')).toBe('localhost:5000/rt:1');
    expect(containerdRef('ghcr.io/org/rt:1')).toBe('ghcr.io/org/rt:1');
  });

  it('imports into the k8s.io namespace once, under the name and the image id', async () => {
    expect(await importIntoContainerd(d, pause, socket)).toEqual({ imported: true });
    const id = (await d.docker(['image', 'inspect', '--format', '{{.Id}}', pause], { check: true })).stdout.trim();
    const refs = execFileSync('ctr', ['-a', socket, '-n', 'k8s.io', 'images', 'ls', '-q'], { encoding: 'utf8' }).split('\n');
    expect(refs).toContain(containerdRef(pause));
    expect(refs).toContain(id); // the CRI plugin's own name for it: what the kubelet resolves
    // unchanged image: nothing to do
    expect(await importIntoContainerd(d, pause, socket)).toEqual({ imported: false });
  });

  it('imports again when the name points at other content', async () => {
    execFileSync('ctr', ['-a', socket, '-n', 'k8s.io', 'images', 'rm', containerdRef(pause)]);
    expect(await importIntoContainerd(d, pause, socket)).toEqual({ imported: true });
  });
});
