/**
 * Everything GET /v1.0/metadata reports. Building blocks contribute through providers
 * (actor types and counts, subscriptions, scheduler addresses) so this module stays small.
 */
import type { ComponentRegistry } from '../components/registry.ts';
import type { SidecarOptions } from '../options.ts';
import type { FeatureFlag, HttpEndpointResource, SubscriptionInfo } from '../resources/types.ts';
import { malformed } from '../http/errors.ts';
import type { ResiliencyMetadata } from '../resiliency/service.ts';
import { formatDuration } from '../../../shared/duration.ts';
import { RUNTIME_VERSION } from '../version.ts';

export interface ActorTypeCount {
  type: string;
  count: number;
}

export interface MetadataResponse {
  id: string;
  runtimeVersion: string;
  enabledFeatures: string[];
  actors: ActorTypeCount[];
  extended: Record<string, string>;
  components: { name: string; type: string; version: string; capabilities: string[] }[];
  /** Components in scope that were not loaded, with why (rt's own field: the operator withheld them as invalid). */
  componentsNotLoaded: { name: string; type: string; reason: string }[];
  httpEndpoints: { name: string }[];
  subscriptions: (Omit<SubscriptionInfo, 'rules'> & { rules: { match: string; path: string }[] })[];
  appConnectionProperties: {
    port: number;
    protocol: string;
    channelAddress: string;
    maxConcurrency: number;
    health: {
      /** Only for apps spoken to over HTTP (the contract's "for the HTTP protocol"). */
      healthCheckPath?: string;
      healthProbeInterval: string;
      healthProbeTimeout: string;
      healthThreshold: number;
    };
  };
  scheduler: { connected_addresses: string[] };
  /** Present when the sidecar runs the workflow engine: the workers connected to it. */
  workflows?: { connectedWorkers: number };
  /** rt's own: present while a Resiliency resource applies: its policies, circuit breakers and counts. */
  resiliency?: ResiliencyMetadata;
}

/** The key under `extended` that holds the runtime version; it cannot be overwritten. */
export const RUNTIME_VERSION_KEY = 'runtimeVersion';
/** The key of gRPC GetMetadata's extended_metadata that carries the `resiliency` field as JSON (the proto has no field for it); reserved too. */
export const RESILIENCY_KEY = 'rt.resiliency';

/** Attribute names fit a URL path segment; values are kept in memory, so they are bounded. */
const ATTRIBUTE_NAME = /^[A-Za-z0-9._-]{1,256}$/;
const MAX_VALUE_BYTES = 64 * 1024;

export class MetadataService {
  private readonly extended = new Map<string, string>();
  private readonly actorProviders: (() => ActorTypeCount[])[] = [];
  private readonly subscriptionProviders: (() => SubscriptionInfo[])[] = [];
  private schedulerProvider: () => string[] = () => [];
  private workersProvider?: () => number;
  private resiliencyProvider?: () => ResiliencyMetadata | undefined;
  private features: FeatureFlag[] = [];
  private httpEndpoints: HttpEndpointResource[] = [];
  private readonly options: SidecarOptions;
  private readonly components: ComponentRegistry;

  constructor(options: SidecarOptions, components: ComponentRegistry) {
    this.options = options;
    this.components = components;
    for (const [k, v] of Object.entries(options.extended)) this.extended.set(k, v);
    this.extended.set(RUNTIME_VERSION_KEY, RUNTIME_VERSION);
  }

  setExtended(name: string, value: string): void {
    this.extended.set(name, value);
  }

  isReservedKey(name: string): boolean {
    return name === RUNTIME_VERSION_KEY || name === RESILIENCY_KEY;
  }

  /** The rules of a custom attribute, for every API that sets one: 400 when broken. */
  checkAttribute(name: string, valueBytes: number): void {
    if (!ATTRIBUTE_NAME.test(name)) throw malformed(`attribute name "${name.slice(0, 80)}" is not valid: use 1-256 letters, digits, '.', '_' or '-'`);
    if (this.isReservedKey(name)) throw malformed(`attribute "${name}" is set by the runtime and cannot be overwritten`);
    if (valueBytes > MAX_VALUE_BYTES) throw malformed(`attribute value is ${valueBytes} bytes; the limit is ${MAX_VALUE_BYTES}`);
  }

  setFeatures(features: FeatureFlag[]): void {
    this.features = features;
  }

  enabledFeatures(): string[] {
    return this.features.filter((f) => f.enabled).map((f) => f.name);
  }

  isFeatureEnabled(name: string): boolean {
    return this.features.some((f) => f.enabled && f.name === name);
  }

  setHttpEndpoints(list: HttpEndpointResource[]): void {
    this.httpEndpoints = list;
  }

  addActorProvider(p: () => ActorTypeCount[]): void {
    this.actorProviders.push(p);
  }

  addSubscriptionProvider(p: () => SubscriptionInfo[]): void {
    this.subscriptionProviders.push(p);
  }

  setSchedulerProvider(p: () => string[]): void {
    this.schedulerProvider = p;
  }

  setWorkflowWorkersProvider(p: () => number): void {
    this.workersProvider = p;
  }

  setResiliencyProvider(p: () => ResiliencyMetadata | undefined): void {
    this.resiliencyProvider = p;
  }

  snapshot(): MetadataResponse {
    const o = this.options;
    const out: MetadataResponse = {
      id: o.appId,
      runtimeVersion: RUNTIME_VERSION,
      enabledFeatures: this.enabledFeatures(),
      actors: this.actorProviders.flatMap((p) => p()),
      extended: Object.fromEntries(this.extended),
      components: this.components.info(),
      componentsNotLoaded: this.components.notLoaded(),
      httpEndpoints: this.httpEndpoints.map((e) => ({ name: e.name })),
      subscriptions: this.subscriptionProviders.flatMap((p) => p()).map((s) => ({
        pubsubname: s.pubsubname,
        topic: s.topic,
        metadata: s.metadata,
        rules: s.rules,
        deadLetterTopic: s.deadLetterTopic,
        type: s.type,
      })),
      appConnectionProperties: {
        port: o.appPort,
        protocol: o.appProtocol,
        channelAddress: o.appChannelAddress,
        maxConcurrency: o.appMaxConcurrency,
        health: {
          ...(o.appProtocol.startsWith('grpc') ? {} : { healthCheckPath: o.appHealthCheckPath }),
          healthProbeInterval: formatDuration(o.appHealthProbeIntervalMs),
          healthProbeTimeout: formatDuration(o.appHealthProbeTimeoutMs),
          healthThreshold: o.appHealthThreshold,
        },
      },
      scheduler: { connected_addresses: this.schedulerProvider() },
      ...(this.workersProvider ? { workflows: { connectedWorkers: this.workersProvider() } } : {}),
    };
    // left out without a Resiliency resource: the answer stays the reference runtime's
    const resiliency = this.resiliencyProvider?.();
    if (resiliency) out.resiliency = resiliency;
    return out;
  }
}
