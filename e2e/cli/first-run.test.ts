/**
 * What a new user and a user of the reference runtime meet first, with the real CLI: the
 * version and help, readable or JSON log lines, the reference sidecar's command line accepted
 * as is, and a clear line instead of a stack trace on a Node that is too old.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScheduler, type RunningScheduler } from '../../scheduler/src/main.ts';
import { createLogger } from '../../shared/logger.ts';
import { canConnect, freePort, waitForPort } from '../../test/services/net.ts';
import { ROOT, runRt, until } from '../rt-process.ts';

let home: string;
beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'rt-first-'));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

const component = (name: string) => `apiVersion: dapr.io/v1alpha1\nkind: Component\nmetadata:\n  name: ${name}\nspec:\n  type: state.in-memory\n  version: v1\n`;

describe('rt version and help', () => {
  it('rt --version and rt version print the version and the node running it', async () => {
    for (const arg of ['--version', 'version']) {
      const run = runRt([arg]);
      expect(await run.exit).toBe(0);
      expect(run.out()).toMatch(/^rt \d+\.\d+\.\d+ \(node v\d+\./);
    }
  });

  it('rt help <command> prints the options of that command; an unknown one is a usage error', async () => {
    const run = runRt(['help', 'run']);
    expect(await run.exit).toBe(0);
    expect(run.out()).toContain('usage: rt run');
    expect(run.out()).toContain('--dapr-http-port');
    const bad = runRt(['help', 'nope']);
    expect(await bad.exit).toBe(2);
    expect(bad.out()).toContain('unknown command "nope"');
  });

  // every machine here has a stock node 20 at /usr/bin/node; where it is new enough, it must run
  const stock = '/usr/bin/node';
  const stockVersion = existsSync(stock) ? spawnSync(stock, ['--version'], { encoding: 'utf8' }).stdout.trim() : '';
  const [major, minor] = stockVersion.slice(1).split('.').map(Number);
  const tooOld = major < 22 || (major === 22 && minor < 19);
  it.runIf(stockVersion !== '')(`the machine's ${stock} (${stockVersion || 'absent'}) running cli/bin/rt.js: ${tooOld ? 'one clear line, no stack trace' : 'runs'}`, () => {
    const r = spawnSync(stock, [join(ROOT, 'cli/bin/rt.js'), '--version'], { encoding: 'utf8' });
    if (!tooOld) {
      expect(r.status).toBe(0);
      return;
    }
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^rt needs Node\.js 22\.19 or newer \(this is v\d+.*npm start/);
  });
});

describe('log lines', () => {
  it('are readable by default: time, level, scope, message, fields; JSON with --log-as-json, without duplicate keys', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const common = ['sidecar', '--app-id', 'logs', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--disable-metrics', '--data-dir', join(home, 'logs')];
    const readable = runRt(common);
    await until(readable, () => readable.out().includes('sidecar ready'));
    await readable.stop();
    const ready = readable.out().split('\n').find((l) => l.includes('sidecar ready'))!;
    expect(ready).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: rt rt sidecar ready: HTTP on 127\.0\.0\.1:\d+, gRPC on 127\.0\.0\.1:\d+ \{"httpPort":\d+,"grpcPort":\d+,"appId":"logs"\}$/);
    expect(readable.out()).not.toMatch(/^\{/m);

    const json = runRt([...common, '--log-as-json', '--log-level', 'debug']);
    await until(json, () => json.out().includes('sidecar ready'));
    await json.stop();
    const lines = json.out().split('\n').filter((l) => l.startsWith('{'));
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) {
      const keys = [...line.matchAll(/[{,]"([^"]+)":/g)].map((m) => m[1]);
      const top = Object.keys(JSON.parse(line) as object);
      // every top-level key once (nested objects may repeat names such as "type")
      for (const k of top) expect(keys.filter((x) => x === k).length, `${k} in ${line}`).toBe(1);
    }
    expect(lines.some((l) => (JSON.parse(l) as { level: number }).level === 20)).toBe(true);
  });

  it('a readable line keeps an error on the line; its stack comes only at debug', () => {
    const logger = join(ROOT, 'shared/logger.ts');
    const run = (level: string) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', `import { createLogger } from ${JSON.stringify(logger)}; createLogger({ level: '${level}', json: false, base: { scope: 'rt.test' } }).warn({ err: new Error('disk on fire'), n: 1 }, 'it failed');`], { encoding: 'utf8', env: { ...process.env, RT_LOG_AS_JSON: '' } }).stdout;
    expect(run('info')).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: rt\.test it failed \{"n":1,"error":"disk on fire"\}\n$/);
    expect(run('debug')).toMatch(/WARN: rt\.test it failed[^\n]*\n\s+err: \{[\s\S]*"stack":[\s\S]*at /);
  });

  it('a child logger that sets its parent scope again writes the key once', () => {
    const out: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((s: string) => (out.push(String(s)), true)) as typeof process.stdout.write;
    try {
      createLogger({ json: true, base: { scope: 'rt' } })
        .child({ scope: 'rt.scheduler' })
        .child({ scope: 'rt.scheduler', n: 1 })
        .info('hello');
    } finally {
      process.stdout.write = write;
    }
    expect(out.join('')).toMatch(/^\{"level":30,"time":\d+,"scope":"rt\.scheduler","n":1,"msg":"hello"\}\n$/);
  });
});

describe("the reference sidecar's command line", () => {
  let scheduler: RunningScheduler;
  beforeAll(async () => {
    scheduler = await startScheduler(
      { port: 0, listenAddress: '127.0.0.1', dataDir: join(home, 'sched'), etcdEndpoints: [], etcdPrefix: '/rt', partitions: 1, leaseTtlSec: 5, replicaId: 'first-run', logLevel: 'silent' },
      createLogger({ level: 'silent' }),
    );
  });
  afterAll(async () => {
    await scheduler?.close();
  });

  it('rt run takes every alias, serves the API on the ports they name and warns about what rt does not have', async () => {
    const [a, b] = [join(home, 'res-a'), join(home, 'res-b')];
    await mkdir(a);
    await mkdir(b);
    await writeFile(join(a, 'a.yaml'), component('store-a'));
    await writeFile(join(b, 'b.yaml'), component('store-b'));
    const [httpPort, grpcPort, internal] = [await freePort(), await freePort(), await freePort()];
    const run = runRt([
      'run',
      '--app-id', 'reference',
      '--dapr-http-port', String(httpPort),
      '--dapr-grpc-port', String(grpcPort),
      '--dapr-internal-grpc-port', String(internal),
      '--app-channel-address', '127.0.0.1',
      '--dapr-listen-addresses', '127.0.0.1',
      '--dapr-http-max-request-size', '1',
      '--dapr-http-read-buffer-size', '4',
      '--resources-path', a,
      '--resources-path', b,
      '--placement-host-address', '127.0.0.1:50005',
      '--scheduler-host-address', scheduler.server.address,
      '--enable-metrics=false',
      '-log-level', 'info',
      '--data-dir', join(home, 'ref-data'),
    ]);
    try {
      await waitForPort('127.0.0.1', httpPort);
      const md = (await (await fetch(`http://127.0.0.1:${httpPort}/v1.0/metadata`)).json()) as { id: string; components: { name: string }[]; scheduler?: { connected_addresses?: string[] } };
      expect(md.id).toBe('reference');
      expect(md.components.map((c) => c.name).sort()).toEqual(['store-a', 'store-b']);
      // --dapr-http-max-request-size 1 = 1 MiB
      const post = (bytes: number) =>
        fetch(`http://127.0.0.1:${httpPort}/v1.0/state/store-a`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ key: 'k', value: 'x'.repeat(bytes) }]) });
      expect((await post(900_000)).status).toBe(204);
      const big = await post(1_100_000);
      expect(big.status).toBe(413);
      // jobs go to the scheduler named by --scheduler-host-address
      const job = await fetch(`http://127.0.0.1:${httpPort}/v1.0-alpha1/jobs/ref`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"dueTime":"1h"}' });
      expect(job.status).toBe(204);
      const out = run.out();
      // --dapr-internal-grpc-port names the sidecar-to-sidecar invocation port
      expect(await canConnect('127.0.0.1', internal)).toBe(true);
      expect(out).not.toContain('--dapr-internal-grpc-port is accepted');
      // rt's own flag now (actors): no warning
      expect(out).not.toContain('--placement-host-address is accepted');
      expect(out).toContain('--dapr-http-read-buffer-size is accepted');
    } finally {
      await run.stop();
    }
  });

  it('a bad value of an alias is a usage error that names it', async () => {
    const run = runRt(['sidecar', '--app-id', 'x', '--dapr-http-max-request-size', 'lots']);
    expect(await run.exit).toBe(2);
    expect(run.out()).toContain('--dapr-http-max-request-size must be a whole number of megabytes, got "lots"');
  });
});

describe('errors a new user meets say what to do', () => {
  const sidecar = async (extra: string[]) => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    return runRt(['sidecar', '--app-id', 'oops', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--disable-metrics', '--data-dir', join(home, 'oops'), ...extra]);
  };

  it('a port in use names the flag (and env) that moves it', async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as { port: number }).port;
    try {
      for (const [flag, what] of [['--http-port', 'HTTP API'], ['--grpc-port', 'gRPC API']] as const) {
        const run = await sidecar([flag, String(port)]);
        expect(await run.exit).toBe(1);
        expect(run.out()).toContain(`port ${port} (the ${what} port) is already in use`);
        expect(run.out()).toContain(`choose a free port with ${flag} <port>`);
        expect(run.out()).not.toMatch(/^\s+at /m);
      }
    } finally {
      taken.close();
    }
  });

  it('a missing resources folder says how to name one', async () => {
    const run = await sidecar(['--resources-path', join(home, 'no-such-folder')]);
    expect(await run.exit).toBe(1);
    expect(run.out()).toContain('resources path does not exist: create the folder');
  });

  it('an unknown component type lists the built-in ones and the pluggable sockets folder', async () => {
    const dir = join(home, 'unknown-type');
    await mkdir(dir);
    await writeFile(join(dir, 'c.yaml'), component('s').replace('state.in-memory', 'state.nosuchstore'));
    const run = await sidecar(['--resources-path', dir, '--components-sockets-folder', join(home, 'sockets')]);
    expect(await run.exit).toBe(1);
    expect(run.out()).toContain(`${join(home, 'sockets')}/nosuchstore.sock`);
    expect(run.out()).toMatch(/built-in state types: state\.in-memory, .*state\.sqlite/);
  });

  it('an unreachable scheduler is said once, with what to check', async () => {
    const dead = await freePort();
    const run = await sidecar(['--scheduler-host-address', `127.0.0.1:${dead}`]);
    try {
      await until(run, () => run.out().includes('does not answer'));
      expect(run.out()).toContain(`the scheduler at 127.0.0.1:${dead} does not answer; jobs and workflow timers wait until it does`);
      expect(run.out()).toContain('Check --scheduler-host-address, or start one with: rt scheduler');
    } finally {
      await run.stop();
    }
  });
});
