/**
 * The sidecar's gRPC port (50001). Building blocks add services before start();
 * the workflow engine's TaskHubSidecarService lives here.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { tokenMatches } from '../http/auth.ts';

export class GrpcServer {
  readonly server: grpc.Server;
  private readonly log: Logger;
  private readonly apiToken?: string;
  private boundPort = 0;
  private services = 0;

  constructor(log: Logger, apiToken?: string) {
    this.log = log;
    this.apiToken = apiToken;
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
      'grpc.keepalive_permit_without_calls': 1,
    });
  }

  addService(service: grpc.ServiceDefinition, impl: grpc.UntypedServiceImplementation): void {
    this.server.addService(service, impl);
    this.services++;
  }

  /**
   * Calls of any method no service here implements go to `handler`, as a bidi stream of raw
   * message bytes (service invocation's gRPC proxying). grpc-js has no public unknown-service
   * handler (grpc/grpc-node#1572), so this wraps its handler lookup; e2e/invoke/grpc-proxy.test.ts
   * fails if an upgrade moves it.
   */
  setFallback(handler: grpc.handleBidiStreamingCall<Buffer, Buffer>): void {
    const server = this.server as unknown as { _retrieveHandler(path: string): unknown };
    const lookup = server._retrieveHandler.bind(server);
    const raw = (b: Buffer) => b;
    server._retrieveHandler = (path: string) => lookup(path) ?? { func: handler, serialize: raw, deserialize: raw, type: 'bidi', path };
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

  async listen(address: string, port: number): Promise<number> {
    const host = address.includes(':') ? `[${address}]` : address;
    this.boundPort = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    this.log.info({ port: this.boundPort, services: this.services }, 'gRPC API listening');
    return this.boundPort;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 3000);
      this.server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
