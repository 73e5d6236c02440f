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
}
