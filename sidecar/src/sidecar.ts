/**
 * Starts one sidecar: HTTP + gRPC APIs, components from the resource source, the app channel
 * and every building block. `startSidecar()` is what `rt run` and `rt sidecar` call.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { AppChannel } from './app/channel.ts';
import { deliverInputEvent } from './bindings/input.ts';
import { builtinCatalog, type ComponentCatalog } from './components/catalog.ts';
import { ComponentRegistry } from './components/registry.ts';
import type { SidecarContext } from './context.ts';
import type { SidecarOptions } from './options.ts';
import { GrpcServer } from './grpc/server.ts';
import { createHttpServer } from './http/server.ts';
import { HEALTHZ, HEALTHZ_OUTBOUND } from './http/route-schemas.ts';
import { startIdentity } from './identity/setup.ts';
import { rtHome } from '../../shared/rt-home.ts';
import { MetadataService } from './metadata/service.ts';
import { openResources } from './resources/setup.ts';
import type { Resources } from './resources/types.ts';
import { orderBlocks, startBlocks } from './block-graph.ts';
import * as buildingBlocks from './blocks.ts';
import { createLogger } from '../../shared/logger.ts';

export const DEFAULT_OPTIONS: Omit<SidecarOptions, 'appId'> = {
  namespace: 'default',
  appPort: 0,
  appProtocol: 'http',
  appChannelAddress: '127.0.0.1',
  appHealthCheck: false,
  appHealthCheckPath: '/healthz',
  appHealthProbeIntervalMs: 5000,
  appHealthProbeTimeoutMs: 500,
  appHealthThreshold: 3,
  appMaxConcurrency: -1,
  listenAddress: '127.0.0.1',
  httpPort: 3500,
  grpcPort: 50001,
  metricsPort: 9090,
  enableMetrics: true,
  resourcesPaths: [],
  componentsSocketsFolder: process.env.RT_COMPONENTS_SOCKETS_FOLDER || '/tmp/rt-components-sockets',
  schedulerAddresses: [],
  dataDir: join(rtHome(), 'data'),
  logLevel: 'info',
  extended: {},
  mode: 'standalone',
  maxRequestBodyBytes: 16 * 1024 * 1024,
};

/** How long in-flight HTTP requests may take to finish once the sidecar stops (the reference runtime's default). */
const SHUTDOWN_GRACE_MS = 5000;

export interface Sidecar {
  ctx: SidecarContext;
  httpPort: number;
  grpcPort: number;
  /** Graceful stop: in-flight requests finish, components are closed. Safe to call twice. */
  close(): Promise<void>;
  /** Settles when the sidecar has stopped, whoever asked (e.g. the gRPC Shutdown method). */
  closed: Promise<void>;
}

export interface StartOptions extends Partial<SidecarOptions> {
  appId: string;
  logger?: Logger;
  /** Extra component types (tests, embedders). */
  catalog?: ComponentCatalog;
}

export async function startSidecar(input: StartOptions): Promise<Sidecar> {
  const options: SidecarOptions = { ...DEFAULT_OPTIONS, ...stripUndefined(input) } as SidecarOptions;
  const log = input.logger ?? createLogger({ level: options.logLevel, json: options.logAsJson ?? (options.mode === 'kubernetes' ? true : undefined), base: { app_id: options.appId, scope: 'rt' } });
  // the declarations are checked before anything starts: a missing need or a cycle stops here
  const blocks = orderBlocks(Object.values(buildingBlocks));
  const closers: (() => Promise<void> | void)[] = [];
  const appReady: (() => Promise<void> | void)[] = [];

  const http = createHttpServer({ log, apiToken: options.apiToken, bodyLimit: options.maxRequestBodyBytes });
  const grpc = new GrpcServer(log, options.apiToken);
  const app = new AppChannel(options, log);
  const catalog = input.catalog ?? builtinCatalog();
  const components: ComponentRegistry = new ComponentRegistry(catalog, {
    appId: options.appId,
    namespace: options.namespace,
    listenAddress: options.listenAddress,
    log,
    // under the binding's inbound resiliency policy once the resiliency block runs (ctx below)
    deliverToApp: (bindingName, event) => deliverInputEvent(ctx.services.resiliency, components, app, bindingName, event, ctx.services.tracing),
  });
  const metadata = new MetadataService(options, components);
  const resources: Resources = { components: [], subscriptions: [], httpEndpoints: [] };

  const ctx: SidecarContext = {
    options,
    log,
    http,
    grpc,
    components,
    resources,
    metadata,
    app,
    onClose: (fn) => closers.push(fn),
    onAppReady: (fn) => appReady.push(fn),
    services: {},
    readiness: [],
  };

  // once only: a gRPC Shutdown and the owner's close() may both ask
  let closing: Promise<void> | undefined;
  let onClosed: () => void = () => undefined;
  const closed = new Promise<void>((r) => (onClosed = r));
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      log.info('shutting down');
      // in-flight requests get a grace period, then their connections are closed: a client that
      // stopped reading (or keeps a connection fastify does not count as idle) must not hold
      // the shutdown forever
      const grace = setTimeout(() => http.server.closeAllConnections(), SHUTDOWN_GRACE_MS);
      // a keep-alive connection busy when the close began becomes idle once its answer is out,
      // and node:http would keep it for its keep-alive timeout: end those as they go idle
      const idle = setInterval(() => http.server.closeIdleConnections(), 50);
      await http.close().catch(() => undefined);
      clearTimeout(grace);
      clearInterval(idle);
      for (const fn of [...closers].reverse()) await Promise.resolve(fn()).catch((e) => log.warn({ err: e }, 'shutdown step failed'));
      await grpc.close();
      await app.close();
      await components.closeAll();
      onClosed();
    })());
  ctx.services.shutdown = close;

  try {
    // 0. the workload identity (mTLS): its first certificate is asked for before anything dials out
    ctx.identity = await startIdentity(options, log);
    if (ctx.identity) {
      const identity = ctx.identity;
      closers.push(() => identity.close());
      ctx.readiness.push(() => identity.problem());
    }

    // 1. resources: files, or the operator's stream in kubernetes mode (resources/setup.ts)
    const res = await openResources(ctx);
    closers.push(() => res.close());

    // 2. blocks that add component types (pluggable components discovered on sockets)
    await startBlocks(ctx, blocks, 'catalog');

    // 3. components: secret stores first, since other components' secretKeyRefs need them
    await res.applier.apply(res.initial, true);

    // 4. building blocks: routes, gRPC services, background work
    http.get('/v1.0/healthz', { schema: HEALTHZ }, async (_req, reply) => {
      const why = ctx.readiness.map((check) => check()).filter((r): r is string => r !== undefined);
      if (why.length === 0) return reply.status(204).send();
      return reply.status(503).send({ errorCode: 'ERR_HEALTH_NOT_READY', message: `the sidecar is not ready: ${why.join('; ')}`, details: why.map((reason) => ({ reason })) });
    });
    // outbound: the components the sidecar talks to answer their ping (pluggable ones, stores with a ping)
    http.get('/v1.0/healthz/outbound', { schema: HEALTHZ_OUTBOUND }, async (_req, reply) => {
      const bad = await components.unhealthy();
      const sourceProblem = res.source.problem();
      if (sourceProblem) bad.push({ name: 'resources', reason: sourceProblem });
      bad.push(...res.applier.problems()); // changes refused while a component is held (workflows' store)
      if (bad.length === 0) return reply.status(204).send();
      return reply.status(500).send({ errorCode: 'ERR_HEALTH_NOT_READY', message: `components not healthy: ${bad.map((b) => `${b.name} (${b.reason})`).join('; ')}`, details: bad });
    });
    await startBlocks(ctx, blocks, 'blocks');
    res.follow(); // later changes of the resources apply to the running sidecar

    // 5. listen
    await http.listen({ host: options.listenAddress, port: options.httpPort });
    const httpPort = (http.server.address() as { port: number }).port;
    const grpcPort = await grpc.listen(options.listenAddress, options.grpcPort);
    log.info({ httpPort, grpcPort, appId: options.appId }, `rt sidecar ready: HTTP on ${options.listenAddress}:${httpPort}, gRPC on ${options.listenAddress}:${grpcPort}`);

    // 6. the app: once reachable, discovery and app-ready hooks (input bindings, job delivery)
    const startApp = async () => {
      if (app.enabled) {
        const ok = await app.waitUntilReachable(Number.POSITIVE_INFINITY, abort.signal);
        if (!ok) return;
        // programmatic subscriptions are discovered by the pub/sub block (pubsub/setup.ts), actor types by the actors block
        app.startHealthProbes();
      }
      for (const fn of appReady) await fn();
    };
    const abort = new AbortController();
    closers.unshift(() => abort.abort());
    const appStarted = startApp().catch((e) => log.error({ err: e }, 'app start hooks failed'));
    closers.unshift(async () => {
      abort.abort();
      await appStarted;
    });

    return { ctx, httpPort, grpcPort, close, closed };
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
