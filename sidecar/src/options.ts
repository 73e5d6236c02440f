/**
 * The options of one sidecar (its flags and env). A module of its own,
 * with no imports, so that the parts the context holds (the app channel, the metadata service)
 * read their options without importing the context that holds them.
 */
export interface SidecarOptions {
  appId: string;
  namespace: string;
  /** 0 = no app. */
  appPort: number;
  appProtocol: 'http' | 'grpc';
  appChannelAddress: string;
  appHealthCheck: boolean;
  appHealthCheckPath: string;
  appHealthProbeIntervalMs: number;
  appHealthProbeTimeoutMs: number;
  appHealthThreshold: number;
  appMaxConcurrency: number;
  /** Bind address of the public API ports: 127.0.0.1 standalone, 0.0.0.0 in a pod. */
  listenAddress: string;
  httpPort: number;
  grpcPort: number;
  /** Sidecar-to-sidecar invocation port; default 50002 on a cluster, a free one standalone. */
  internalGrpcPort?: number;
  metricsPort: number;
  /** Serve Prometheus metrics on metricsPort (default true). */
  enableMetrics: boolean;
  resourcesPaths: string[];
  configFile?: string;
  /** API token: callers must send it in rt-api-token (or dapr-api-token). */
  apiToken?: string;
  /** Token the sidecar sends to the app (header rt-api-token / dapr-api-token). */
  appApiToken?: string;
  componentsSocketsFolder: string;
  /** Socket names (without extension) to wait for before discovery (--wait-for-sockets). */
  waitForSockets?: string[];
  /** Scheduler gRPC addresses (host:port); empty = no scheduler. */
  schedulerAddresses: string[];
  /** Actor placement gRPC addresses (host:port); none = every actor type the app declares is served here (actors/placement/local.ts). */
  placementAddresses?: string[];
  /** Folder for embedded persistence (SQLite files); default ~/.rt/data. */
  dataDir: string;
  logLevel: string;
  /** JSON log lines (--log-as-json; default in kubernetes mode) instead of readable ones. */
  logAsJson?: boolean;
  /** Set by `rt run`: CLI pid, app command … (go to metadata `extended`). */
  extended: Record<string, string>;
  mode: 'standalone' | 'kubernetes';
  /** Kubernetes mode: the operator's gRPC address (host:port); resources come from it instead of files. */
  controlPlaneAddress?: string;
  /** Maximum request body in bytes for the HTTP API. */
  maxRequestBodyBytes: number;
  /** Workload identity and mutual TLS between rt processes (--enable-mtls; docs/identity.md); off when absent. */
  mtls?: MtlsOptions;
}

/** `--enable-mtls` and its settings (env RT_MTLS_ENABLED=true, RT_TRUST_DOMAIN, …: cli/options.ts). */
export interface MtlsOptions {
  /** The SPIFFE trust domain of this sidecar's identity (default cluster.local). */
  trustDomain?: string;
  /** host:port of the identity issuer (the operator's CA service); standalone without one: the local CA under RT_HOME. */
  issuerAddress?: string;
  /** PEM roots trusted before the issuer's first answer (RT_TRUST_ANCHORS_FILE). */
  trustAnchorsFile?: string;
  /** The token sent to the issuer (RT_OPERATOR_TOKEN_FILE; in kubernetes mode /var/run/secrets/rt.io/token). */
  tokenFile?: string;
  /** PEM CA of the issuer's serving certificate (RT_OPERATOR_CA_FILE); none: plaintext to the issuer. */
  issuerCaFile?: string;
}
