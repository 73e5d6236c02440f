/**
 * Actors across hosts with mutual TLS (`mtls: {}`, the local CA under RT_HOME as `rt run
 * --enable-mtls` uses it): placement reached with the workload certificate (placement serving TLS
 * with a test CA's certificate, RT_PLACEMENT_TLS_CA_FILE, and checking clients against the local
 * CA), and the forwarded actor calls going over the mutual-TLS internal port. A plaintext client
 * sending an actor call to that port gets no answer from the actor runtime.
 */
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePlacementArgs, startPlacementProcess, type RunningPlacement } from '../../placement/src/main.ts';
import { localCa } from '../../sidecar/src/identity/setup.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { makeTestCa, type TestCa } from '../services/ca.ts';
import { freePort } from '../services/net.ts';
import { startActorApp, type ActorTestApp } from './app.ts';

const quiet = pino({ level: 'silent' });
const appId = 'mtls-actors';

describe('actors across hosts with mutual TLS', () => {
  let dir: string;
  let serving: TestCa;
  let placement: RunningPlacement;
  const apps: ActorTestApp[] = [];
  const sidecars: Sidecar[] = [];
  const prev = { home: process.env.RT_HOME, ca: process.env.RT_PLACEMENT_TLS_CA_FILE };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rt-actors-mtls-'));
    process.env.RT_HOME = join(dir, 'home');
    // the local CA the sidecars will take their certificates from, made now so placement can trust it
    const ca = await localCa(join(dir, 'home', 'identity'));
    serving = makeTestCa();
    writeFileSync(join(dir, 'tls.crt'), serving.cert);
    writeFileSync(join(dir, 'tls.key'), serving.key);
    writeFileSync(join(dir, 'serving-ca.pem'), serving.caPem);
    writeFileSync(join(dir, 'bundle.pem'), ca.certPem);
    const port = await freePort();
    const o = parsePlacementArgs(['--port', String(port), '--tls-cert-file', join(dir, 'tls.crt'), '--tls-key-file', join(dir, 'tls.key'), '--identity-trust-bundle-file', join(dir, 'bundle.pem')]);
    if (o === 'help') throw new Error('help');
    placement = await startPlacementProcess(o, quiet);
    process.env.RT_PLACEMENT_TLS_CA_FILE = join(dir, 'serving-ca.pem');
    for (let i = 0; i < 2; i++) {
      const app = await startActorApp({ entities: ['Counter'] });
      apps.push(app);
      const sc = await startSidecar({ appId, appPort: app.port, httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, `data-${i}`), placementAddresses: [`127.0.0.1:${port}`], mtls: {}, logger: quiet });
      app.sidecarPort = sc.httpPort;
      sidecars.push(sc);
    }
  }, 90_000);

  afterAll(async () => {
    await Promise.all(sidecars.map((s) => s.close()));
    await Promise.all(apps.map((a) => a.close()));
    await placement?.close();
    serving?.remove();
    if (prev.home === undefined) delete process.env.RT_HOME;
    else process.env.RT_HOME = prev.home;
    if (prev.ca === undefined) delete process.env.RT_PLACEMENT_TLS_CA_FILE;
    else process.env.RT_PLACEMENT_TLS_CA_FILE = prev.ca;
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 30_000);

  const echo = (sc: Sidecar, id: string) => fetch(`http://127.0.0.1:${sc.httpPort}/v1.0/actors/Counter/${id}/method/echo`, { method: 'PUT', body: id, headers: { 'content-type': 'text/plain' } });

  it('forwards calls over the mutual-TLS internal port to the host placement names', async () => {
    // once both hosts are in the table, calls through the first reach both apps
    const end = Date.now() + 30_000;
    let i = 0;
    while (apps[1]!.log.calls.length === 0 || apps[0]!.log.calls.length === 0) {
      const r = await echo(sidecars[0]!, `m-${i++ % 32}`);
      if (Date.now() > end) throw new Error(`calls never reached both hosts: ${r.status} ${await r.text()}`);
      if (r.status !== 200) await new Promise((res) => setTimeout(res, 50));
    }
    // an actor of the second host, through the first: the answer crosses mTLS unchanged
    const id = apps[1]!.log.calls[0]!.id;
    const r = await echo(sidecars[0]!, id);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe(id);
    expect(apps[0]!.log.calls.some((c) => c.id === id)).toBe(false);
  }, 60_000);

  it('the internal port takes no plaintext actor call', async () => {
    const { port } = await sidecars[1]!.ctx.services.internalPort!.listening;
    const outcome = await new Promise<string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, method: 'PUT', path: '/Counter/x/method/echo', headers: { 'rt-invoke-target': appId, 'rt-invoke-actor': '1' } }, (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (e) => resolve(`refused: ${e.message}`));
      req.setTimeout(5000, () => req.destroy(new Error('timeout')));
      req.end('x');
    });
    expect(outcome).toMatch(/^refused/);
  });
});
