/**
 * One actor host as its own process, for the suites that kill one (remote.test.ts): the actor
 * test app (app.ts) and a sidecar (startSidecar) in front of it, with the placement address
 * given. Settings come as JSON in RT_TEST_HOST (appId, placement addresses, resources and data
 * folders, the app's actor config, more sidecar options). It prints one JSON line with its ports once the sidecar
 * serves, and serves the app's log at GET /log on `logPort`, so a test can read what the app
 * was asked after the fact. With `modules: true` it records every module the process loads
 * (module.registerHooks, before the sidecar's code is imported) and serves them at GET /modules.
 * SIGTERM stops it gracefully; SIGKILL is the crash the suites want.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { registerHooks } from 'node:module';
import pino from 'pino';

interface HostSettings {
  appId: string;
  placement?: string[];
  resourcesPath: string;
  dataDir: string;
  config: Record<string, unknown>;
  modules?: boolean;
  /** Where to write the app's log once the sidecar has stopped (SIGTERM): what it was asked to the end. */
  logFile?: string;
  /** More of the sidecar's options (e.g. schedulerAddresses). */
  sidecar?: Record<string, unknown>;
}

const s = JSON.parse(process.env.RT_TEST_HOST ?? '{}') as HostSettings;
const loaded: string[] = [];
if (s.modules) {
  registerHooks({
    resolve: (spec, ctx, next) => {
      const r = next(spec, ctx);
      loaded.push(r.url);
      return r;
    },
  });
}

const { startActorApp } = await import('./app.ts');
const { startSidecar } = await import('../../sidecar/src/sidecar.ts');
const app = await startActorApp(s.config);
const sc = await startSidecar({
  appId: s.appId,
  appPort: app.port,
  httpPort: 0,
  grpcPort: 0,
  metricsPort: 0,
  enableMetrics: false,
  dataDir: s.dataDir,
  resourcesPaths: [s.resourcesPath],
  placementAddresses: s.placement,
  logger: pino({ level: process.env.RT_TEST_HOST_LOG ?? 'silent' }),
  ...s.sidecar,
});
app.sidecarPort = sc.httpPort;
const logs = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(req.url === '/modules' ? loaded : app.log));
});
await new Promise<void>((r) => logs.listen(0, '127.0.0.1', r));
process.stdout.write(`${JSON.stringify({ http: sc.httpPort, grpc: sc.grpcPort, logPort: (logs.address() as AddressInfo).port, pid: process.pid })}\n`);
process.once('SIGTERM', () => {
  void (async () => {
    await sc.close();
    if (s.logFile) writeFileSync(s.logFile, JSON.stringify(app.log));
    await app.close();
    logs.closeAllConnections();
    logs.close();
    process.exit(0);
  })();
});
