/**
 * Services `rt run` starts in-process so that nothing else needs installing: the scheduler,
 * as a real gRPC server on a free loopback port over the app's SQLite file, so the sidecar
 * talks to it exactly as it would to `rt scheduler` (and metadata reports its address).
 * Skipped when --scheduler-host-address is given.
 */
import { embeddedStorePath, startEmbeddedEngine, startSchedulerServer } from '../scheduler/src/index.ts';
import { DEFAULT_OPTIONS, type StartOptions } from '../sidecar/src/sidecar.ts';
import { createLogger } from '../shared/logger.ts';

export interface EmbeddedServices {
  close(): Promise<void>;
}

export async function startEmbeddedServices(options: StartOptions): Promise<EmbeddedServices> {
  if ((options.schedulerAddresses?.length ?? 0) > 0 || (options.mode ?? 'standalone') !== 'standalone') return { close: async () => {} };
  const log = createLogger({ level: options.logLevel ?? DEFAULT_OPTIONS.logLevel, json: options.logAsJson, base: { app_id: options.appId, scope: 'rt.scheduler' } });
  const file = embeddedStorePath(options.dataDir ?? DEFAULT_OPTIONS.dataDir, options.namespace ?? DEFAULT_OPTIONS.namespace, options.appId);
  const engine = await startEmbeddedEngine(file, log);
  const server = await startSchedulerServer(engine, { host: '127.0.0.1', port: 0, log }).catch(async (e) => {
    await engine.close();
    throw e;
  });
  options.schedulerAddresses = [server.address];
  return {
    close: async () => {
      await engine.close();
      await server.close();
    },
  };
}
