/**
 * The tracing block: when the Configuration's spec.tracing has a samplingRate above 0 (or the
 * OTEL_EXPORTER_OTLP_* environment names an endpoint), it loads the
 * OpenTelemetry SDK (sdk.ts), puts a SERVER span on every HTTP and gRPC API call (http.ts,
 * grpc.ts) and provides `tracing` to the blocks that pass context on (invocation, pub/sub). It
 * starts in the catalog phase, before the other blocks add their routes. With tracing off it
 * provides nothing and loads nothing. The Configuration is read at start (a reload does not
 * turn tracing on or off: docs/observability.md).
 */
import { defineBlock } from '../block-graph.ts';
import { readTracingSpec } from './config.ts';
import { withOtelEnv } from './env.ts';

export const block = defineBlock({
  name: 'tracing',
  phase: 'catalog',
  provides: ['tracing'],
  async setup(ctx) {
    const spec = readTracingSpec(ctx.resources.configuration?.spec.tracing, (field, message) => {
      throw new Error(`Configuration ${ctx.resources.configuration?.name}: ${field} ${message}`);
    });
    // the OTEL_EXPORTER_OTLP_* environment may add OTLP export (and turn tracing on): env.ts
    const config = withOtelEnv(spec, process.env);
    if (!config) return;
    const log = ctx.log.child({ block: 'tracing' });
    const [{ loadSdk }, { TracingService }, { traceHttpServer }, { grpcTracingInterceptor }] = await Promise.all([import('./sdk.ts'), import('./service.ts'), import('./http.ts'), import('./grpc.ts')]);
    const tracing = new TracingService(config, await loadSdk(config, ctx.options.appId, log), ctx.options.appId);
    traceHttpServer(ctx.http, tracing);
    // pluggable components get the component call's context as metadata (one slot, unset while off)
    const [{ callTrace }, { componentContext }] = await Promise.all([import('../pluggable/connection.ts'), import('./components.ts')]);
    callTrace.current = () => componentContext().getStore();
    ctx.grpc.addInterceptor(grpcTracingInterceptor(tracing));
    ctx.onClose(() => tracing.shutdown().catch((e: unknown) => log.warn({ err: (e as Error).message }, 'spans could not be exported at shutdown')));
    log.info({ samplingRate: config.samplingRate, protocol: config.otel?.protocol, endpoint: config.otel?.url, zipkin: config.zipkin?.url }, 'tracing on');
    return { tracing };
  },
});
