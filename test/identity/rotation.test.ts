/**
 * Certificates that live 8 s, with real sidecars in this process and a test issuer (a real CA
 * gRPC server): steady invocation over HTTP/1.1 and the gRPC stream through at least 3 rotations
 * of both sidecars without a failed call, a new connection served the new certificate; the issuer
 * down at renewal (the current certificate keeps serving, `rt_identity_cert_expiry_seconds` counts
 * down, /v1.0/healthz says when it expired); the issuer down at start (/v1.0/healthz 503 with the
 * reason, the internal port not listening, then serving once the issuer is up).
 */
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { connect as tlsConnect } from 'node:tls';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEntries, registryDir } from '../../sidecar/src/invoke/registry/local.ts';
import { startSidecar, type Sidecar, type StartOptions } from '../../sidecar/src/sidecar.ts';
import { startTestIssuer, type TestIssuer } from './test-issuer.ts';

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('certificate rotation and the issuer down', () => {
  let dir: string;
  let app: Server;
  let appPort = 0;
  const sidecars: Sidecar[] = [];
  const issuers: TestIssuer[] = [];
  const prev = { home: process.env.RT_HOME, transport: process.env.RT_INVOKE_TRANSPORT };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-mtls-rotation-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end(String(req.headers['rt-caller-app-id'])));
    });
    appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
  });
  afterAll(async () => {
    await Promise.all(sidecars.map((s) => s.close()));
    for (const i of issuers) await i.stop();
    app?.close();
    for (const [k, v] of [['RT_HOME', prev.home], ['RT_INVOKE_TRANSPORT', prev.transport]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await rm(dir, { recursive: true, force: true });
  });

  const start = async (o: Partial<StartOptions> & { appId: string }, issuer: TestIssuer) => {
    const s = await startSidecar({ httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }), appPort, mtls: { issuerAddress: issuer.address }, ...o });
    sidecars.push(s);
    return s;
  };
  const invoke = (from: Sidecar, to: string) => fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/${to}/method/hello`, { method: 'POST', body: 'x' });
  const healthz = async (s: Sidecar) => {
    const res = await fetch(`http://127.0.0.1:${s.httpPort}/v1.0/healthz`);
    return { status: res.status, text: res.status === 204 ? '' : await res.text() };
  };

  it('rotates both sidecars at least 3 times under steady invocation without a failed call; the issuer down at renewal leaves the current certificate serving', async () => {
    const issuer = await startTestIssuer({ ttlMs: 8_000 });
    issuers.push(issuer);
    const target = await start({ appId: 'rot-target', enableMetrics: true, metricsPort: 0 }, issuer);
    const caller = await start({ appId: 'rot-caller' }, issuer);
    process.env.RT_INVOKE_TRANSPORT = 'grpc';
    const grpcCaller = await start({ appId: 'rot-caller-grpc' }, issuer);
    delete process.env.RT_INVOKE_TRANSPORT;
    const rotations = new Map<string, number>();
    for (const s of [target, caller, grpcCaller]) s.ctx.identity!.onRotate(() => rotations.set(s.ctx.options.appId, (rotations.get(s.ctx.options.appId) ?? 0) + 1));

    const failures: string[] = [];
    let calls = 0;
    let stop = false;
    const load = async (from: Sidecar, to: string, expect: string) => {
      while (!stop) {
        try {
          const res = await invoke(from, to);
          const text = await res.text();
          if (res.status !== 200 || text !== expect) failures.push(`${res.status} ${text}`);
        } catch (e) {
          failures.push((e as Error).message);
        }
        calls++;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const running = [load(caller, 'rot-target', 'rot-caller'), load(grpcCaller, 'rot-target', 'rot-caller-grpc'), load(target, 'rot-caller', 'rot-target')];
    await until(() => [...rotations.values()].length === 3 && [...rotations.values()].every((n) => n >= 3), '3 rotations of each sidecar', 60_000);
    stop = true;
    await Promise.all(running);
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(100);

    // a new connection to the target's internal port is served its current certificate
    const port = listEntries(registryDir()).find((e) => e.appId === 'rot-target')!.internalGrpcPort;
    const me = caller.ctx.identity!.current!;
    const served = await new Promise<string>((resolve, reject) => {
      const s = tlsConnect({ host: '127.0.0.1', port, key: me.keyPem, cert: me.certPem, ca: me.bundlePem, checkServerIdentity: () => undefined, ALPNProtocols: ['http/1.1'] }, () => {
        resolve(s.getPeerX509Certificate()!.serialNumber);
        s.destroy();
      });
      s.on('error', reject);
    });
    expect(served).toBe(new X509Certificate(target.ctx.identity!.current!.certPem).serialNumber);

    // the issuer goes away: calls go on with the current certificates until they expire
    await issuer.stop();
    const held = target.ctx.identity!.current!;
    const renewal = held.receivedAt + 0.8 * (held.notAfter - held.receivedAt);
    await until(() => Date.now() > renewal, 'the renewal time');
    expect(target.ctx.identity!.current).toBe(held);
    expect((await invoke(caller, 'rot-target')).status).toBe(200);
    expect(await healthz(target)).toEqual({ status: 204, text: '' });
    const metrics = await (await fetch(`http://127.0.0.1:${target.ctx.metrics!.port}/metrics`)).text();
    const left = Number(/^rt_identity_cert_expiry_seconds\{[^}]*\} (\S+)$/m.exec(metrics)?.[1]);
    expect(left).toBeGreaterThan(-1);
    expect(left).toBeLessThan(8);
    await until(() => Date.now() > held.notAfter + 100, 'the certificate to expire');
    const expired = await healthz(target);
    expect(expired.status).toBe(503);
    expect(JSON.parse(expired.text)).toMatchObject({ errorCode: 'ERR_HEALTH_NOT_READY', message: expect.stringMatching(/workload certificate expired at .* identity issuer at 127\.0\.0\.1:\d+ has not renewed it/) });
  }, 120_000); // certificates of 8 s: 3 s ones expired before their renewal came back beside load 16

  it('with the issuer down at start: /v1.0/healthz answers 503 with the reason and the internal port waits; once the issuer is up it serves', async () => {
    const issuer = await startTestIssuer({ ttlMs: 60_000 });
    issuers.push(issuer);
    await issuer.stop();
    const late = await start({ appId: 'late-target' }, issuer);
    const first = await healthz(late);
    expect(first.status).toBe(503);
    expect(JSON.parse(first.text).message).toMatch(/no workload certificate yet from the identity issuer at 127\.0\.0\.1:\d+: unreachable.*the internal invocation port waits for the workload certificate/);
    expect(listEntries(registryDir()).find((e) => e.appId === 'late-target')).toBeUndefined();
    await issuer.start();
    await until(async () => (await healthz(late)).status === 204, 'the late sidecar to be ready');
    const caller = await start({ appId: 'late-caller' }, issuer);
    await until(() => listEntries(registryDir()).some((e) => e.appId === 'late-target'), 'its registry entry');
    const res = await invoke(caller, 'late-target');
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('late-caller');
  }, 30_000);
});
