/**
 * The configuration a test Jaeger runs with (Jaeger v2 is an OpenTelemetry collector, so this is
 * a collector config): OTLP in over gRPC and HTTP, Zipkin v2 over HTTP, spans kept in memory, the
 * query API out; every listener on 127.0.0.1 at a port the caller chose. The collector's own metrics are off (they
 * would listen on :8888) and no health, pprof, zpages or sampling extension runs, so nothing else
 * listens. No batch processor either: a span is queryable as soon as the receiver has it.
 */
export interface JaegerPorts {
  otlpGrpc: number;
  otlpHttp: number;
  queryHttp: number;
  /** The query service's gRPC API: unused by the suites, but it always listens (default :16685). */
  queryGrpc: number;
  /** Zipkin v2 JSON/protobuf over HTTP (POST /api/v2/spans), a second receiver of the same pipeline. */
  zipkin: number;
}

/** A gRPC and an HTTP server block (both have an `endpoint`), indented by `pad`. */
function grpcAndHttp(pad: string, grpc: number, http: number): string {
  const at = (port: number) => JSON.stringify(`127.0.0.1:${port}`);
  return [`grpc:`, `  endpoint: ${at(grpc)}`, `http:`, `  endpoint: ${at(http)}`].map((l) => pad + l).join('\n');
}

export function jaegerConfig(ports: JaegerPorts): string {
  return `
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
${grpcAndHttp('    ', ports.queryGrpc, ports.queryHttp)}
receivers:
  otlp:
    protocols:
${grpcAndHttp('      ', ports.otlpGrpc, ports.otlpHttp)}
  zipkin:
    endpoint: "127.0.0.1:${ports.zipkin}"
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp, zipkin]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
`;
}
