/**
 * Standalone mTLS (`rt run --enable-mtls`): the local CA under RT_HOME is made on first use
 * (`identity/ca.crt`, `ca.key`, the user's only) and gives local sidecars their certificates;
 * they invoke each other over mTLS, and a sidecar without mTLS cannot reach them. The flags and
 * their env forms.
 */
import { statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSidecarArgs } from '../../cli/options.ts';
import { localCa } from '../../sidecar/src/identity/setup.ts';
import { splitPemBundle } from '../../sidecar/src/identity/x509.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

describe('standalone mTLS with the local CA', () => {
  let dir: string;
  let app: Server;
  const sidecars: Record<string, Sidecar> = {};
  const prev = process.env.RT_HOME;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-mtls-local-'));
    process.env.RT_HOME = join(dir, 'home');
    app = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end(String(req.headers['rt-caller-app-id'])));
    });
    const appPort = await new Promise<number>((r) => app.listen(0, '127.0.0.1', () => r((app.address() as { port: number }).port)));
    const common = { httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: dir, logger: pino({ level: 'silent' }) };
    [sidecars.a, sidecars.b] = await Promise.all([startSidecar({ ...common, appId: 'local-a', appPort, mtls: {} }), startSidecar({ ...common, appId: 'local-b', appPort, mtls: {} })]);
    sidecars.plain = await startSidecar({ ...common, appId: 'local-plain' });
  });
  afterAll(async () => {
    await Promise.all(Object.values(sidecars).map((s) => s.close()));
    app?.close();
    if (prev === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prev;
    await rm(dir, { recursive: true, force: true });
  });

  const invoke = (from: Sidecar, to: string) => fetch(`http://127.0.0.1:${from.httpPort}/v1.0/invoke/${to}/method/x`, { method: 'POST', body: 'x' });

  it('makes one local CA under RT_HOME, readable by the user only, and both sidecars hold certificates of it', async () => {
    const caDir = join(dir, 'home', 'identity');
    expect(statSync(join(caDir, 'ca.key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(caDir, 'ca.crt')).mode & 0o777).toBe(0o600);
    expect(statSync(caDir).mode & 0o777).toBe(0o700);
    const ca = await localCa(caDir);
    for (const s of [sidecars.a, sidecars.b]) expect(splitPemBundle(s.ctx.identity!.current!.bundlePem)).toEqual(splitPemBundle(ca.certPem));
  });

  it('invokes over mTLS between local sidecars; a sidecar without mTLS cannot reach them', async () => {
    const ab = await invoke(sidecars.a, 'local-b');
    expect(ab.status).toBe(200);
    expect(await ab.text()).toBe('local-a');
    const ba = await invoke(sidecars.b, 'local-a');
    expect(await ba.text()).toBe('local-b');
    const plain = await invoke(sidecars.plain, 'local-a');
    expect(plain.status).toBe(500);
    expect(((await plain.json()) as { errorCode: string }).errorCode).toBe('ERR_DIRECT_INVOKE');
  });

  it('reads --enable-mtls and its settings from flags and env', () => {
    const env = { ...process.env };
    try {
      expect(parseSidecarArgs(['--app-id', 'a'], false).options.mtls).toBeUndefined();
      expect(parseSidecarArgs(['--app-id', 'a', '--enable-mtls', '--trust-domain', 'example.org', '--sentry-address', 'op:6500'], false).options.mtls).toMatchObject({ trustDomain: 'example.org', issuerAddress: 'op:6500' });
      Object.assign(process.env, { RT_MTLS_ENABLED: 'true', RT_IDENTITY_ISSUER_ADDRESS: 'rt-operator.rt-system:6500', RT_TRUST_ANCHORS_FILE: '/var/run/rt/ca.crt', RT_OPERATOR_TOKEN_FILE: '/t', RT_OPERATOR_CA_FILE: '/ca' });
      expect(parseSidecarArgs(['--app-id', 'a', '--mode', 'kubernetes'], false).options.mtls).toEqual({ trustDomain: undefined, issuerAddress: 'rt-operator.rt-system:6500', trustAnchorsFile: '/var/run/rt/ca.crt', tokenFile: '/t', issuerCaFile: '/ca' });
      delete process.env.RT_IDENTITY_ISSUER_ADDRESS;
      expect(() => parseSidecarArgs(['--app-id', 'a', '--mode', 'kubernetes'], false)).toThrow(/needs --identity-issuer-address/);
    } finally {
      for (const k of ['RT_MTLS_ENABLED', 'RT_IDENTITY_ISSUER_ADDRESS', 'RT_TRUST_ANCHORS_FILE', 'RT_OPERATOR_TOKEN_FILE', 'RT_OPERATOR_CA_FILE']) {
        if (env[k] === undefined) delete process.env[k];
        else process.env[k] = env[k];
      }
    }
  });
});
