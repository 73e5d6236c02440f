/**
 * The service invocation building block: the internal port other sidecars call (HTTP/1.1 and gRPC), this
 * sidecar's entry in the local registry (standalone), and the HTTP invoke routes.
 */
import type { SidecarContext } from '../context.ts';
import { EndpointCaller, endpointTarget } from './endpoints.ts';
import { checkAccess, parseAccessControl, type AccessControl } from './access-control.ts';
import { invokeServiceDefinition, invokeServiceHandler } from './grpc-service.ts';
import { callerProxy, Channels } from './grpc-proxy.ts';
import { InternalServer, type AccessCheck } from './internal-server.ts';
import type { InternalPort } from './internal-actors.ts';
import { Invoker } from './invoker.ts';
import { LocalRegistry, register, socketPath } from './registry/local.ts';
import { DnsResolver, INTERNAL_GRPC_PORT, LocalResolver } from './resolve.ts';
import { invokeRoutes } from './routes.ts';
import { parseAppTarget } from './target.ts';
import { directInvokeError, type InvokeCall } from './call.ts';
import { resilientDispatch } from './resilient.ts';
import { tracedDispatch } from '../tracing/outbound.ts';

export async function setup(ctx: SidecarContext): Promise<{ invoke: Invoker; internalPort: InternalPort }> {
  const o = ctx.options;
  const standalone = o.mode !== 'kubernetes';
  const grpcApp = o.appProtocol === 'grpc' && o.appPort > 0 ? `${o.appChannelAddress.includes(':') ? `[${o.appChannelAddress}]` : o.appChannelAddress}:${o.appPort}` : undefined;
  const identity = ctx.identity;
  const server = new InternalServer({ appId: o.appId, namespace: o.namespace, app: ctx.app, log: ctx.log, access: accessCheck(ctx), grpcApp, appApiToken: o.appApiToken, identity, tracing: ctx.services.tracing });
  ctx.onClose(() => server.close());
  // standalone sidecars share one machine: a free port each, found through the registry. With
  // mTLS the port waits for the first certificate: it does not serve without one
  let internal: { port: number; socket?: string } | undefined;
  const listening = (async () => {
    const port = await server.listen(o.listenAddress, o.internalGrpcPort ?? (standalone ? 0 : INTERNAL_GRPC_PORT));
    const socket = standalone ? await server.listenUnix(socketPath(o.appId, process.pid, port)) : undefined;
    ctx.log.debug({ port, socket, mtls: !!identity }, 'internal invocation port listening');
    internal = { port, socket };
    return internal;
  })();
  if (identity?.current || !identity) await listening;
  else {
    ctx.readiness.push(() => (internal ? undefined : 'the internal invocation port waits for the workload certificate'));
    listening.catch((e: unknown) => ctx.log.error({ err: e }, 'the internal invocation port could not listen'));
  }

  const registry = standalone ? new LocalRegistry() : undefined;
  ctx.onClose(() => registry?.close());
  const resolver = registry ? new LocalResolver(registry) : new DnsResolver();
  // HTTP/1.1 between sidecars unless RT_INVOKE_TRANSPORT=grpc (docs/service-invocation.md)
  const transport = process.env.RT_INVOKE_TRANSPORT === 'grpc' ? 'grpc' : 'http1';
  const caller = { app_id: o.appId, namespace: o.namespace, trust_domain: identity?.id.trustDomain ?? '' };
  const invoker = new Invoker(resolver, caller, transport, identity);
  ctx.onClose(() => invoker.close());

  const endpoints = new EndpointCaller(ctx.components, standalone ? undefined : 'kubernetes');
  ctx.onClose(() => endpoints.close());
  const direct = async (target: string, call: InvokeCall) => {
    // an HTTPEndpoint's name or a URL goes out of rt; anything else is an app id
    const external = endpointTarget(target, ctx.resources.httpEndpoints);
    if (external) return endpoints.call(external, call);
    const app = parseAppTarget(target, o.namespace);
    if (!app) throw directInvokeError(target, `"${target}" is neither an app id (optionally .<namespace>) nor an HTTPEndpoint`);
    return invoker.invoke(app, call);
  };
  // tracing on: a CLIENT span per try, whose context the next hop gets
  const tracing = ctx.services.tracing;
  const traced = tracing ? tracedDispatch(tracing, direct, (target) => !!endpointTarget(target, ctx.resources.httpEndpoints)) : direct;
  // resiliency policies by app id (or HTTPEndpoint name), for HTTP and gRPC callers alike
  const dispatch = ctx.services.resiliency ? resilientDispatch(traced, ctx.services.resiliency, (target) => parseAppTarget(target, o.namespace)?.appId ?? target) : traced;
  await invokeRoutes(ctx.http, dispatch);
  ctx.grpc.addService(() => ({ definition: invokeServiceDefinition(), implementation: { InvokeService: invokeServiceHandler(ctx.grpc, dispatch) } }));
  // gRPC proxying: any method this port does not implement, sent with rt-app-id, goes to that app
  const channels = new Channels(identity);
  ctx.onClose(() => channels.close());
  ctx.grpc.setFallback(callerProxy(ctx.grpc, resolver, caller, channels, tracing));

  if (registry) {
    let entry: ReturnType<typeof register> | undefined;
    const host = o.listenAddress === '0.0.0.0' || o.listenAddress === '::' ? '127.0.0.1' : o.listenAddress;
    const write = (at: { port: number; socket?: string }) => {
      const address = ctx.http.server.address();
      entry = register(
        {
          appId: o.appId,
          namespace: o.namespace,
          host,
          httpPort: typeof address === 'object' && address ? address.port : o.httpPort,
          grpcPort: o.grpcPort,
          internalGrpcPort: at.port,
          internalSocket: at.socket,
          appPort: o.appPort,
          appProtocol: o.appProtocol,
          metricsPort: o.enableMetrics ? o.metricsPort : undefined,
          pid: process.pid,
          cliPid: Number(o.extended.cliPID) || undefined,
          command: o.extended.appCommand || undefined,
          startedAt: new Date().toISOString(),
        },
        registry.dir,
      );
    };
    // other sidecars find this one once both its HTTP and its internal port listen
    ctx.http.addHook('onListen', async () => {
      if (internal) write(internal);
      else void listening.then((at) => write(at), () => undefined);
    });
    // the gRPC port is known once it listens, which is after the HTTP port
    ctx.onAppReady(() => entry?.update({ grpcPort: ctx.grpc.port || o.grpcPort }));
    ctx.onClose(() => entry?.remove());
  }
  return { invoke: invoker, internalPort: { listening, serveActorCalls: (h) => server.serveActorCalls(h) } };
}

/** accessControl of the Configuration in force now (hot updates included), parsed once per version. */
function accessCheck(ctx: SidecarContext): AccessCheck {
  let seen: unknown = null;
  let parsed: { ac?: AccessControl; error?: string } = {};
  return (head) => {
    const spec = ctx.resources.configuration?.spec;
    if (spec !== seen) {
      seen = spec;
      try {
        // with mTLS a policy without a trust domain names callers of this sidecar's own
        parsed = { ac: parseAccessControl(spec, ctx.identity?.id.trustDomain) };
      } catch (e) {
        // a policy that cannot be read must not open the app to every caller
        parsed = { error: `the Configuration's accessControl is invalid, so every call is refused: ${(e as Error).message}` };
        ctx.log.error(parsed.error);
      }
    }
    return parsed.error ?? checkAccess(parsed.ac, head);
  };
}
