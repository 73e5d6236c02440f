/**
 * The sidecar's gRPC port (50001). Building blocks add services before start();
 * the workflow engine's TaskHubSidecarService lives here.
 *
 * Services are added as loaders and built on the first connection: loading their protos (the
 * runtime API, the Durable Task protocol, invocation) is a fifth of the sidecar's start-up and
 * several MB that a sidecar whose app never speaks gRPC does not need. The port itself listens
 * from the start (a plain net.Server); its connections are handed to grpc-js's connection
 * injector, so the first call is served as soon as it arrives.
 */
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { tokenMatches } from '../../../shared/token.ts';
import { createGrpcServer, shutdownGrpcServer } from '../../../shared/grpc-server.ts';

/** A service's definition and handlers, made when the port gets its first connection. */
export type ServiceLoader = () => { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation };

type Built = { server: grpc.Server; injector: ReturnType<grpc.Server['createConnectionInjector']> };

/** Messages up to 64 MiB both ways (state values, invocation payloads, bulk calls). */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** How long close() lets open calls finish before cutting them. */
const SHUTDOWN_GRACE_MS = 3000;

export class GrpcServer {
  private readonly log: Logger;
  private readonly apiToken?: string;
  private readonly loaders: ServiceLoader[] = [];
  private readonly interceptors: grpc.ServerInterceptor[] = [];
  private fallback?: grpc.handleBidiStreamingCall<Buffer, Buffer>;
  private built?: Built;
  private listener?: NetServer;
  private boundPort = 0;

  constructor(log: Logger, apiToken?: string) {
    this.log = log;
    this.apiToken = apiToken;
  }

  /**
   * Adds a server interceptor (grpc-js `ServerOptions.interceptors`) to every call; before the
   * first connection only, since grpc-js fixes them when the server is made.
   */
  addInterceptor(interceptor: grpc.ServerInterceptor): void {
    if (this.built) throw new Error('gRPC interceptors are added before the port serves its first connection');
    this.interceptors.push(interceptor);
  }

  /** Adds a service; its loader runs on the first connection (at once if one came already). */
  addService(load: ServiceLoader): void {
    this.loaders.push(load);
    if (this.built) this.register(this.built.server, load);
  }

  /**
   * Calls of any method no service here implements go to `handler`, as a bidi stream of raw
   * message bytes (service invocation's gRPC proxying). grpc-js has no public unknown-service
   * handler (grpc/grpc-node#1572), so this wraps its handler lookup; e2e/invoke/grpc-proxy.test.ts
   * fails if an upgrade moves it.
   */
  setFallback(handler: grpc.handleBidiStreamingCall<Buffer, Buffer>): void {
    this.fallback = handler;
    if (this.built) this.installFallback(this.built.server, handler);
  }

  /** True when the call carries the API token (or none is configured). */
  authorized(metadata: grpc.Metadata): boolean {
    if (!this.apiToken) return true;
    const sent = metadata.get('rt-api-token')[0] ?? metadata.get('dapr-api-token')[0];
    return typeof sent === 'string' && tokenMatches(sent, this.apiToken);
  }

  /** The status to fail a call with when authorized() is false. */
  static unauthenticated(): Partial<grpc.StatusObject> {
    return { code: grpc.status.UNAUTHENTICATED, details: 'missing or invalid API token: send it in the rt-api-token metadata' };
  }

  get port(): number {
    return this.boundPort;
  }

  /** Serves one connection that speaks HTTP/2 (gRPC): this port's, or one another server sniffed. */
  inject(socket: Duplex): void {
    let built: Built;
    try {
      built = this.build();
    } catch (e) {
      // a service that cannot be built is a defect of this build: say so, keep the process
      this.log.error({ err: e }, 'the gRPC services could not be built');
      socket.destroy();
      return;
    }
    built.injector.injectConnection(socket);
  }

  async listen(address: string, port: number): Promise<number> {
    const listener = createNetServer({ noDelay: true }, (s: Socket) => this.inject(s));
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, address, () => {
        listener.off('error', reject);
        resolve();
      });
    });
    this.listener = listener;
    this.boundPort = (listener.address() as { port: number }).port;
    this.log.info({ port: this.boundPort, services: this.loaders.length }, 'gRPC API listening');
    return this.boundPort;
  }

  async close(): Promise<void> {
    const listener = this.listener;
    const closed = new Promise<void>((r) => (listener ? listener.close(() => r()) : r()));
    const built = this.built;
    if (built) await shutdownGrpcServer(built.server, SHUTDOWN_GRACE_MS);
    await closed;
  }

  private build(): Built {
    if (this.built) return this.built;
    const server = createGrpcServer({ maxReceiveBytes: MAX_MESSAGE_BYTES, maxSendBytes: MAX_MESSAGE_BYTES, interceptors: this.interceptors });
    for (const load of this.loaders) this.register(server, load);
    if (this.fallback) this.installFallback(server, this.fallback);
    this.built = { server, injector: server.createConnectionInjector(grpc.ServerCredentials.createInsecure()) };
    return this.built;
  }

  private register(server: grpc.Server, load: ServiceLoader): void {
    const { definition, implementation } = load();
    server.addService(definition, implementation);
  }

  private installFallback(server: grpc.Server, handler: grpc.handleBidiStreamingCall<Buffer, Buffer>): void {
    const s = server as unknown as { _retrieveHandler(path: string): unknown };
    const lookup = s._retrieveHandler.bind(s);
    const raw = (b: Buffer) => b;
    s._retrieveHandler = (path: string) => lookup(path) ?? { func: handler, serialize: raw, deserialize: raw, type: 'bidi', path };
  }
}
