/**
 * The OpenTelemetry JS SDK, loaded with import() only when a Configuration turns tracing on: a
 * sidecar with tracing off never loads a byte of it (idle RSS and start time stay as they were).
 * Parent-based sampling with the trace-id ratio of samplingRate, a batch processor toward each
 * exporter (OTLP over gRPC or HTTP/protobuf, Zipkin), service.name = the app id unless
 * OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise.
 */
import type { Logger } from 'pino';
import type { OtlpExport, TracingConfig } from './config.ts';
import type { TraceParent } from './context.ts';

export type SpanKindName = 'server' | 'client' | 'producer' | 'consumer' | 'internal';
export type Attributes = Record<string, string | number | boolean>;

/** One span as the sidecar sees it: its own context to pass on, and its end. */
export interface RtSpan {
  /** This span's context (what goes on as traceparent). */
  readonly context: TraceParent;
  readonly traceState?: string;
  setAttributes(attrs: Attributes): void;
  /** Ends the span; `error` marks its status as an error (5xx, a gRPC error) with the message. */
  end(error?: string): void;
}

export interface SpanStarter {
  /** `links`: other contexts the span relates to (a batch's entries), set at start as OpenTelemetry requires. */
  start(name: string, kind: SpanKindName, parent: TraceParent | undefined, traceState: string | undefined, attrs: Attributes, links?: TraceParent[]): RtSpan;
  /** Exports what is buffered and stops (the sidecar's shutdown). */
  shutdown(): Promise<void>;
}

/** Tests may hand their own exporter (the SDK's InMemorySpanExporter). */
export interface SdkOptions {
  exporter?: unknown;
  /** Export each span at once (SimpleSpanProcessor) instead of in batches. */
  simple?: boolean;
}

export async function loadSdk(config: TracingConfig, appId: string, log: Logger, opts: SdkOptions = {}): Promise<SpanStarter> {
  const [api, sdk, resources] = await Promise.all([import('@opentelemetry/api'), import('@opentelemetry/sdk-trace'), import('@opentelemetry/resources')]);
  type Exporter = InstanceType<typeof sdk.InMemorySpanExporter>;
  // service.name defaults to the app id; OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME add or override (env.ts)
  const resource = { 'service.name': appId, ...config.resource };
  const exporters: Exporter[] = [];
  if (opts.exporter) exporters.push(opts.exporter as Exporter);
  else {
    if (config.otel) exporters.push((await otlpExporter(config.otel)) as Exporter);
    if (config.zipkin) {
      // loaded only when a Configuration names Zipkin: most sidecars never need it
      const { ZipkinExporter } = await import('@opentelemetry/exporter-zipkin');
      exporters.push(new ZipkinExporter({ url: config.zipkin.url, serviceName: resource['service.name'] }) as unknown as Exporter);
    }
  }
  const processors = exporters.map((exporter) => (opts.simple ? new sdk.SimpleSpanProcessor({ exporter }) : new sdk.BatchSpanProcessor({ exporter })));
  if (config.stdout) processors.push(new sdk.SimpleSpanProcessor({ exporter: new LogExporter(log) as unknown as Exporter }));
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes(resource),
    sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(config.samplingRate) }),
    spanProcessors: processors,
  });
  const tracer = provider.getTracer('rt');
  const kinds = { server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, producer: api.SpanKind.PRODUCER, consumer: api.SpanKind.CONSUMER, internal: api.SpanKind.INTERNAL };
  return {
    start(name, kind, parent, traceState, attrs, links) {
      const ctx = parent
        ? api.trace.setSpanContext(api.ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.flags, isRemote: true, traceState: traceState ? api.createTraceState(traceState) : undefined })
        : api.ROOT_CONTEXT;
      const spanLinks = links?.map((l) => ({ context: { traceId: l.traceId, spanId: l.spanId, traceFlags: l.flags, isRemote: true } }));
      const span = tracer.startSpan(name, { kind: kinds[kind], attributes: attrs, ...(spanLinks?.length ? { links: spanLinks } : {}) }, ctx);
      const sc = span.spanContext();
      return {
        context: { traceId: sc.traceId, spanId: sc.spanId, flags: sc.traceFlags },
        traceState: sc.traceState?.serialize() || traceState,
        setAttributes: (a) => void span.setAttributes(a),
        end(error) {
          if (error !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
          span.end();
        },
      };
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
}

/** The OTLP exporter of `otel` (gRPC or HTTP/protobuf), with its headers and timeout when given. */
async function otlpExporter(otel: OtlpExport): Promise<unknown> {
  const timeout = otel.timeoutMillis ? { timeoutMillis: otel.timeoutMillis } : {};
  if (otel.protocol === 'http') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
    return new OTLPTraceExporter({ url: otel.url, ...timeout, ...(otel.headers ? { headers: otel.headers } : {}) });
  }
  const [{ OTLPTraceExporter }, grpc] = await Promise.all([import('@opentelemetry/exporter-trace-otlp-grpc'), import('@grpc/grpc-js')]);
  const credentials = otel.url.startsWith('https:') ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
  let metadata: InstanceType<typeof grpc.Metadata> | undefined;
  if (otel.headers) {
    metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(otel.headers)) metadata.set(k, v);
  }
  return new OTLPTraceExporter({ url: otel.url, credentials, ...timeout, ...(metadata ? { metadata } : {}) });
}

/** spec.tracing.stdout: each ended span as one log line (the reference writes them to stdout). */
class LogExporter {
  private readonly log: Logger;
  constructor(log: Logger) {
    this.log = log;
  }
  export(spans: { name: string; spanContext(): { traceId: string; spanId: string }; parentSpanContext?: { spanId: string }; attributes: object; duration: [number, number] }[], done: (r: { code: number }) => void): void {
    for (const s of spans) {
      const { traceId, spanId } = s.spanContext();
      this.log.info({ traceId, spanId, parentSpanId: s.parentSpanContext?.spanId, attributes: s.attributes, ms: s.duration[0] * 1e3 + s.duration[1] / 1e6 }, `span ${s.name}`);
    }
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}
