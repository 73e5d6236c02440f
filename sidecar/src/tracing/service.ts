/**
 * The tracing block's service: spans whose parent is the context a call brought (traceparent /
 * tracestate), with rt's own attributes. It exists only while tracing is on: blocks hold
 * `ctx.services.tracing` (undefined when off), so the off path is one check of that slot.
 */
import type { TracingConfig } from './config.ts';
import type { CarriedContext } from './carried.ts';
import { firstValue, keepTraceState, parseTraceParent, type TraceParent } from './context.ts';
import { tracedComponentCall } from './components.ts';
import type { Attributes, RtSpan, SpanKindName, SpanStarter } from './sdk.ts';

export { contextHeaders, metadataContext, type CarriedContext } from './carried.ts';

export class TracingService {
  readonly config: TracingConfig;
  private readonly starter: SpanStarter;
  private readonly appId: string;

  constructor(config: TracingConfig, starter: SpanStarter, appId: string) {
    this.config = config;
    this.starter = starter;
    this.appId = appId;
  }

  /**
   * Starts a span under the carried context (none, or one that does not parse: a new trace),
   * with rt.app_id and the given attributes; `links`: the traceparents it relates to (one per
   * entry of a batch; those that do not parse, and the parent's own, are left out).
   */
  start(name: string, kind: SpanKindName, carried: CarriedContext | undefined, attrs: Attributes, links?: unknown[]): RtSpan {
    const parent = parseTraceParent(firstValue(carried?.traceparent));
    const state = parent ? keepTraceState(carried?.tracestate) : undefined;
    attrs['rt.app_id'] = this.appId;
    // the parent is not linked again: it already relates the span to that context (and Jaeger
    // would show the link in place of the CHILD_OF reference)
    const linked = links?.map((l) => parseTraceParent(firstValue(l))).filter((l): l is TraceParent => l !== undefined && !(parent && l.spanId === parent.spanId && l.traceId === parent.traceId));
    return this.starter.start(name, kind, parent, state, attrs, linked);
  }

  /** A call to component `name` of `type` under a CLIENT span (state, secrets, configuration, lock: components.ts). */
  componentCall<T>(name: string, type: string, operation: string | undefined, call: () => Promise<T>): Promise<T> {
    return tracedComponentCall(this, name, type, operation, call);
  }

  shutdown(): Promise<void> {
    return this.starter.shutdown();
  }
}
