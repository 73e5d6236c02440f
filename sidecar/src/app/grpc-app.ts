/**
 * The sidecar's gRPC client of an app that speaks gRPC (--app-protocol grpc): the app callback
 * services (AppCallback, AppCallbackAlpha, AppCallbackHealthCheck) that the ecosystem's SDK
 * servers implement, with the app's API token on every call and the app channel's concurrency
 * limit (--app-max-concurrency, shared with proxied gRPC calls) over all of them. The proto is loaded on the first use, so sidecars of
 * HTTP apps never pay for it.
 */
import { join } from 'node:path';
import type * as grpcTypes from '@grpc/grpc-js';
import type * as protoLoaderTypes from '@grpc/proto-loader';
import type { SidecarOptions } from '../options.ts';
import { PROTO_DIR } from '../grpc/runtime/proto.ts';

const PACKAGE = 'dapr.proto.runtime.v1';
const SERVICES = { callback: 'AppCallback', alpha: 'AppCallbackAlpha', health: 'AppCallbackHealthCheck' } as const;
export type AppService = keyof typeof SERVICES;

type Unary = (req: unknown, md: grpcTypes.Metadata, opts: grpcTypes.CallOptions, cb: (err: grpcTypes.ServiceError | null, res?: unknown) => void) => void;
type Client = grpcTypes.Client & Record<string, Unary>;

let loaded: Promise<{ grpc: typeof grpcTypes; def: protoLoaderTypes.PackageDefinition }> | undefined;
function load() {
  loaded ??= (async () => {
    const [grpc, protoLoader] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader')]);
    const def = protoLoader.loadSync('appcallback.proto', {
      keepCase: true,
      longs: Number,
      enums: Number,
      defaults: true,
      oneofs: true,
      // google.protobuf.Any as {'@type', ...fields} for Value/StringValue (job data, as the
      // runtime API's jobs carry it); other Any stay {type_url, value}
      json: true,
      includeDirs: [join(import.meta.dirname, 'proto'), PROTO_DIR],
    });
    return { grpc, def };
  })();
  return loaded;
}

/** The gRPC status code of a failed call (undefined when it is no gRPC error). */
export function grpcCode(e: unknown): number | undefined {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

/** gRPC's UNIMPLEMENTED: the app does not serve the method. */
export const UNIMPLEMENTED = 12;

export class GrpcApp {
  private clients?: Promise<Record<AppService, Client> & { grpc: typeof grpcTypes }>;
  private readonly address: string;
  private readonly token?: string;
  /** One --app-max-concurrency slot; the function it gives frees it. */
  private readonly slot: () => Promise<() => void>;

  constructor(opts: Pick<SidecarOptions, 'appChannelAddress' | 'appPort' | 'appApiToken'>, slot: () => Promise<() => void>) {
    this.address = opts.appChannelAddress.includes(':') && !opts.appChannelAddress.startsWith('[') ? `[${opts.appChannelAddress}]:${opts.appPort}` : `${opts.appChannelAddress}:${opts.appPort}`;
    this.token = opts.appApiToken;
    this.slot = slot;
  }

  private connect() {
    this.clients ??= load().then(({ grpc, def }) => {
      const make = (service: string) => {
        const Ctor = grpc.makeGenericClientConstructor(def[`${PACKAGE}.${service}`] as grpcTypes.ServiceDefinition, service);
        return new Ctor(this.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 * 1024 * 1024, 'grpc.max_send_message_length': 64 * 1024 * 1024 }) as Client;
      };
      return { grpc, callback: make(SERVICES.callback), alpha: make(SERVICES.alpha), health: make(SERVICES.health) };
    });
    return this.clients;
  }

  /**
   * One unary call within the concurrency limit (health checks bypass it: a busy app is not a
   * dead one); rejects with the gRPC error.
   */
  async call(service: AppService, method: string, req: unknown, extra: Record<string, string> = {}, timeoutMs = 60_000): Promise<unknown> {
    const clients = await this.connect();
    const md = new clients.grpc.Metadata();
    if (this.token) {
      md.set('rt-api-token', this.token);
      md.set('dapr-api-token', this.token);
    }
    for (const [k, v] of Object.entries(extra)) md.set(k, v);
    const c = clients[service];
    const free = service === 'health' ? undefined : await this.slot();
    try {
      return await new Promise((resolve, reject) => c[method](req, md, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res))));
    } finally {
      free?.();
    }
  }

  /**
   * Whether the app's connection is up now. After an UNAVAILABLE status this tells the app's own
   * answer (the connection stays ready) from grpc-js's when the app could not be reached or
   * dropped the connection (it is not).
   */
  async connected(): Promise<boolean> {
    const c = await this.connect();
    return c.callback.getChannel().getConnectivityState(false) === c.grpc.connectivityState.READY;
  }

  async close(): Promise<void> {
    if (!this.clients) return;
    const c = await this.clients;
    c.callback.close();
    c.alpha.close();
    c.health.close();
  }
}
