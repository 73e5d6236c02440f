/**
 * The one grpc-js server setup of rt's gRPC servers (the sidecar's API port, the scheduler,
 * placement, the operator): the server's options and interceptors, its credentials (plaintext, TLS, or TLS
 * asking for / requiring a client certificate: grpc-server-credentials.ts), binding to host:port,
 * and shutdown with a grace period. What differs between them is passed in (docs/ARCHITECTURE.md,
 * "gRPC servers"): message sizes, the grace period, and whether the server binds a port itself
 * (scheduler, placement, operator) or is handed connections (the sidecar's net.Server in front, which
 * listens before grpc-js loads).
 *
 * grpc-js is read only when a function here runs: the sidecar's bundle loads it on first use.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { reloadingServerCredentials, type ClientCertificateMode, type TlsSource } from './grpc-server-credentials.ts';

export interface GrpcServerOptions {
  /** The largest message a client may send (grpc-js's default: 4 MiB). */
  maxReceiveBytes?: number;
  /** The largest message the server sends (grpc-js's default: no limit). */
  maxSendBytes?: number;
  /** Server interceptors (grpc-js `ServerOptions.interceptors`), e.g. tracing; fixed once the server is made. */
  interceptors?: grpc.ServerInterceptor[];
}

/**
 * A grpc-js server with rt's options. Every server lets clients send keepalive pings while no
 * call is open (`keepalive_permit_without_calls`): sidecars, the scheduler's and the operator's
 * clients all keep channels open between calls, and grpc-js answers a ping it does not permit by
 * closing the connection (GOAWAY ENHANCE_YOUR_CALM).
 */
export function createGrpcServer(opts: GrpcServerOptions = {}): grpc.Server {
  const options: grpc.ServerOptions = { 'grpc.keepalive_permit_without_calls': 1 };
  if (opts.maxReceiveBytes !== undefined) options['grpc.max_receive_message_length'] = opts.maxReceiveBytes;
  if (opts.maxSendBytes !== undefined) options['grpc.max_send_message_length'] = opts.maxSendBytes;
  if (opts.interceptors?.length) options.interceptors = opts.interceptors;
  return new grpc.Server(options);
}

export interface GrpcServerCredentialsOptions {
  /** Serve over TLS: a PEM certificate chain and key (and the CA client certificates are checked against), as files re-read when they change, or buffers. */
  tls?: TlsSource;
  /** With `tls`: whether a client certificate is asked for (`request`), required (`require`) or not (`none`, the default). */
  clientCertificate?: ClientCertificateMode;
  log?: Logger;
}

/** Plaintext without `tls`; else reloading TLS credentials (grpc-server-credentials.ts). */
export function grpcServerCredentials(opts: GrpcServerCredentialsOptions): grpc.ServerCredentials {
  const clientCertificate = opts.clientCertificate ?? 'none';
  if (!opts.tls) {
    if (clientCertificate !== 'none') throw new Error('a client certificate can only be asked for over TLS');
    return grpc.ServerCredentials.createInsecure();
  }
  return reloadingServerCredentials(opts.tls, { clientCertificate, log: opts.log });
}

/** host:port as grpc-js binds it: an IPv6 address in brackets. */
export function grpcBindAddress(host: string, port: number): string {
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/** Binds the server to host:port (0 = a free port) and resolves with the port bound. */
export function bindGrpcServer(server: grpc.Server, host: string, port: number, credentials: grpc.ServerCredentials): Promise<number> {
  return new Promise<number>((resolve, reject) => server.bindAsync(grpcBindAddress(host, port), credentials, (err, p) => (err ? reject(err) : resolve(p))));
}

/**
 * Stops the server: open calls get `graceMs` to finish (tryShutdown), then every connection is cut
 * (forceShutdown). `graceMs` 0 cuts at once: for a server whose streams never end by themselves.
 */
export function shutdownGrpcServer(server: grpc.Server, graceMs: number): Promise<void> {
  if (graceMs <= 0) {
    server.forceShutdown();
    return Promise.resolve();
  }
  return new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

export interface StartedGrpcServer {
  server: grpc.Server;
  port: number;
  /** host:port as bound (an IPv6 host in brackets). */
  address: string;
  close(): Promise<void>;
}

export interface StartGrpcServerOptions extends GrpcServerOptions, GrpcServerCredentialsOptions {
  host: string;
  port: number;
  /** Adds the server's services before it binds. */
  services: (server: grpc.Server) => void;
  /** How long close() lets open calls finish before cutting them (0: at once). */
  shutdownGraceMs: number;
}

/** Makes, fills and binds a server (the scheduler's, placement's, the operator's). */
export async function startGrpcServer(opts: StartGrpcServerOptions): Promise<StartedGrpcServer> {
  // credentials first: unreadable TLS files fail before anything is bound
  const credentials = grpcServerCredentials(opts);
  const server = createGrpcServer(opts);
  opts.services(server);
  const port = await bindGrpcServer(server, opts.host, opts.port, credentials);
  return { server, port, address: grpcBindAddress(opts.host, port), close: () => shutdownGrpcServer(server, opts.shutdownGraceMs) };
}
