/**
 * The context handed to every building block at start (the sidecar's options: options.ts).
 * A building block is a folder whose `block.ts` declares what it needs and provides, with a
 * `setup(ctx)` that adds routes, gRPC services and hooks (block-graph.ts).
 */
import type { SecretsService } from './secrets/service.ts';
import type { LockService } from './lock/service.ts';
import type { ConfigurationService } from './configuration/service.ts';
import type { CryptoService } from './crypto/service.ts';
import type { ResiliencyService } from './resiliency/service.ts';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { AppChannel } from './app/channel.ts';
import type { ComponentRegistry } from './components/registry.ts';
import type { GrpcServer } from './grpc/server.ts';
import type { MetadataService } from './metadata/service.ts';
import type { PublishService } from './pubsub/publish.ts';
import type { Resources } from './resources/types.ts';
import type { StateService } from './state/service.ts';
import type { Engine } from './workflows/engine.ts';
import type { Invoker } from './invoke/invoker.ts';
import type { InternalPort } from './invoke/internal-actors.ts';
import type { BindingsService } from './bindings/service.ts';
import type { JobsService } from './jobs/service.ts';
import type { InternalJobs } from './jobs/internal.ts';
import type { IdentityManager } from './identity/manager.ts';
import type { SidecarOptions } from './options.ts';
import type { ActorsService } from './actors/service.ts';
import type { TracingService } from './tracing/service.ts';

export interface SidecarContext {
  options: SidecarOptions;
  log: Logger;
  http: FastifyInstance;
  grpc: GrpcServer;
  components: ComponentRegistry;
  resources: Resources;
  metadata: MetadataService;
  app: AppChannel;
  /** Runs at shutdown, in reverse order of registration. */
  onClose(fn: () => Promise<void> | void): void;
  /** Runs once the app is reachable (or at once when there is no app). */
  onAppReady(fn: () => Promise<void> | void): void;
  /** Services of the building blocks, for other API surfaces (the gRPC runtime API) to reuse. */
  services: BlockServices;
  /** Set by the metrics block once it listens (absent: metrics off or port taken). */
  metrics?: { port: number };
  /** This sidecar's workload identity when mTLS is on. */
  identity?: IdentityManager;
  /** Why the sidecar is not ready, each answering undefined when it is: /v1.0/healthz answers 503 with the reasons. */
  readiness: (() => string | undefined)[];
}

/**
 * The services blocks provide: each is filled from what a block's setup returns (block-graph.ts);
 * a slot stays empty when its block is not running or chose not to provide it.
 */
export interface BlockServices {
  state?: StateService;
  /** The jobs block's operations (they answer "no scheduler" when none is configured). */
  jobs?: JobsService;
  /** Durable reminders for other blocks (workflow timers), when a scheduler is configured. */
  internalJobs?: InternalJobs;
  bindings?: BindingsService;
  workflows?: Engine;
  secrets?: SecretsService;
  /** The configuration block's get / subscribe / unsubscribe and its active subscriptions. */
  configuration?: ConfigurationService;
  /** The cryptography block's encrypt / decrypt (dapr.io/enc/v1 streams). */
  crypto?: CryptoService;
  /** The distributed lock block's tryLock / unlock. */
  lock?: LockService;
  pubsub?: PublishService;
  /** The Resiliency resources' policies (timeouts, retries, circuit breakers) and their counts. */
  resiliency?: ResiliencyService;
  /** The actor runtime's operations (the gRPC actor calls reuse them). */
  actors?: ActorsService;
  /** Spans and trace context, while the Configuration turns tracing on (absent: off). */
  tracing?: TracingService;
  /** Service invocation toward other apps (the gRPC InvokeService reuses it). */
  invoke?: Invoker;
  /** The internal invocation port: where other sidecars reach this one (the actors' calls between hosts). */
  internalPort?: InternalPort;
  /** Graceful stop of this sidecar, as its owner's close() does (the gRPC Shutdown call). */
  shutdown?: () => Promise<void>;
}
