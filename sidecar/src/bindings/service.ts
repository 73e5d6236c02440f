/**
 * The output bindings building block for both API surfaces (HTTP routes.ts, gRPC
 * grpc/runtime/bindings.ts): finds the binding (400 listing the loaded ones), checks the
 * operation (400 listing the binding's), checks the metadata, invokes, and turns a failure into
 * a row of the error table (api/errors.ts). The transports decode the request and encode the
 * answer; the HTTP API's streamed `data` (stream-body.ts) goes through `invokeStreamed`.
 */
import { ERRORS, fail } from '../api/errors.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { BindingRequest, BindingResponse, OutputBinding, StreamedBindingRequest } from '../components/types.ts';
import { ApiError, errorMessage, malformed } from '../http/errors.ts';
import { componentCall, type ResiliencyService } from '../resiliency/service.ts';
import { bindingSpan, endAfter } from '../tracing/outbound.ts';
import type { CarriedContext, TracingService } from '../tracing/service.ts';

/** An invocation as a transport decoded it: `operation` and `metadata` are checked here. */
export interface InvokeRequest {
  operation: unknown;
  data: unknown;
  metadata: unknown;
  /** The call's trace context (the API request's traceparent / tracestate). */
  trace?: CarriedContext;
}

export class BindingsService {
  private readonly components: ComponentRegistry;
  private readonly resiliency?: ResiliencyService;
  private readonly tracing?: TracingService;

  /** `tracing`: a CLIENT span per call, its context passed to the binding in the request's metadata. */
  constructor(components: ComponentRegistry, resiliency?: ResiliencyService, tracing?: TracingService) {
    this.components = components;
    this.resiliency = resiliency;
    this.tracing = tracing;
  }

  /** The output binding called `name`, or a 400 listing the loaded ones. */
  binding(name: string): OutputBinding {
    if (!name) throw malformed('"name" is required: the binding component to invoke');
    const binding = this.components.outputBinding(name);
    if (!binding) {
      const loaded = this.components.namesOf('bindings');
      throw fail(ERRORS.BINDING_NOT_FOUND, `output binding "${name.slice(0, 80)}" is not loaded; loaded bindings: ${loaded.join(', ') || 'none'}${this.components.notLoadedNote(name)}`);
    }
    return binding;
  }

  /** The operation, checked against the binding's list. */
  operation(name: string, binding: OutputBinding, operation: unknown): string {
    if (typeof operation !== 'string' || operation === '') throw malformed('"operation" is required and must be a string');
    const operations = binding.operations();
    if (!operations.includes(operation)) {
      throw fail(ERRORS.BINDING_OPERATION_NOT_SUPPORTED, `binding "${name}" does not support operation "${operation.slice(0, 80)}"; supported: ${operations.join(', ')}`);
    }
    return operation;
  }

  /** Invokes `operation` of the binding called `name`. */
  async invoke(name: string, req: InvokeRequest): Promise<BindingResponse> {
    const binding = this.binding(name);
    const request: BindingRequest = { operation: this.operation(name, binding, req.operation), data: req.data, metadata: bindingMetadata(req.metadata) };
    // under the binding's outbound policy; a streamed request (below) is read once, so never retried
    const call = () => guarded(name, () => componentCall(this.resiliency, this.components, name, 'Outbound', () => binding.invoke(request)));
    if (!this.tracing) return call();
    return endAfter(bindingSpan(this.tracing, name, request.operation, request.metadata, req.trace ?? {}), call);
  }

  /**
   * Invokes a streamed operation (its `data` arriving as chunks) of a binding found with binding():
   * the same CLIENT span as invoke(), its context added to the metadata the binding reads (the
   * early part and the complete one, which comes once the body is read).
   */
  async invokeStreamed(name: string, binding: OutputBinding & Required<Pick<OutputBinding, 'invokeStreamed'>>, req: StreamedBindingRequest, trace?: CarriedContext): Promise<BindingResponse> {
    if (!this.tracing) return guarded(name, () => binding.invokeStreamed(req));
    const context: Record<string, string> = {};
    const span = bindingSpan(this.tracing, name, req.operation, context, trace ?? {});
    const traced: StreamedBindingRequest = {
      operation: req.operation,
      data: req.data,
      early: req.early && Object.assign(req.early, context),
      complete: async () => Object.assign(await req.complete(), context),
    };
    return endAfter(span, () => guarded(name, () => binding.invokeStreamed(traced)));
  }
}

/** The request's metadata: an object of strings (absent = none); a later member wins, as in JSON.parse. */
export function bindingMetadata(value: unknown): Record<string, string> {
  const metadata: Record<string, string> = {};
  if (value === undefined || value === null) return metadata;
  if (typeof value !== 'object' || Array.isArray(value)) throw malformed('"metadata" must be an object of strings');
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v !== 'string') throw malformed(`"metadata.${k}" must be a string`);
    // an own "__proto__" key stays a plain entry
    Object.defineProperty(metadata, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return metadata;
}

async function guarded(name: string, fn: () => Promise<BindingResponse>): Promise<BindingResponse> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw fail(ERRORS.BINDING_FAILED, `error invoking output binding "${name}": ${errorMessage(e)}`);
  }
}
