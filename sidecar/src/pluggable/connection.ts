/**
 * One gRPC channel to a component's socket and the clients of the services on it. Every call
 * carries `x-component-instance: <component name>`, so one component process can serve
 * several components.
 */
import * as grpc from '@grpc/grpc-js';
import { socketAddress } from './discovery.ts';
import { componentService, COMPONENTS_PACKAGE } from './protos.ts';

export const INSTANCE_HEADER = 'x-component-instance';

/**
 * Set by the tracing block while tracing is on: the context of the component call's CLIENT span
 * (tracing/components.ts), sent as `traceparent` / `tracestate` metadata. Unset: one check per call.
 */
export const callTrace: { current?: () => { traceparent: string; tracestate?: string } | undefined } = {};
/** No call to a component may hang an API request forever. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // a component that restarts is found again quickly
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  // the component is a trusted local process; state values and binding payloads can be large
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
  // per-call bookkeeping for channelz (a debugging service rt does not serve) costs CPU on every call
  'grpc.enable_channelz': 0,
};

type Unary = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => grpc.ClientUnaryCall;
type Duplex = (md: grpc.Metadata, opts?: grpc.CallOptions) => grpc.ClientDuplexStream<unknown, unknown>;

export class Connection {
  readonly path: string;
  readonly channel: grpc.Channel;
  private readonly instance: string;
  private readonly clients = new Map<string, grpc.Client>();
  /** The unary calls' metadata, made once: grpc-js copies a call's metadata when the call starts. */
  private readonly unaryMetadata: grpc.Metadata;

  constructor(path: string, instance: string) {
    this.path = path;
    this.instance = instance;
    this.channel = new grpc.Channel(socketAddress(path), grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    this.unaryMetadata = this.metadata();
  }

  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set(INSTANCE_HEADER, this.instance);
    return md;
  }

  private withTrace(trace: { traceparent: string; tracestate?: string }): grpc.Metadata {
    const md = this.unaryMetadata.clone();
    md.set('traceparent', trace.traceparent);
    if (trace.tracestate) md.set('tracestate', trace.tracestate);
    return md;
  }

  /** `service` is the full name, e.g. dapr.proto.components.v1.StateStore. */
  private client(service: string): grpc.Client {
    let c = this.clients.get(service);
    if (!c) {
      const Ctor = componentService(service.slice(COMPONENTS_PACKAGE.length + 1));
      c = new Ctor(socketAddress(this.path), grpc.credentials.createInsecure(), { channelOverride: this.channel });
      this.clients.set(service, c);
    }
    return c;
  }

  unary<Res>(service: string, method: string, req: unknown, timeoutMs = DEFAULT_CALL_TIMEOUT_MS): Promise<Res> {
    const client = this.client(service);
    const fn = (client as unknown as Record<string, Unary>)[method];
    return new Promise<Res>((resolve, reject) => {
      // grpc-js makes an Error per call only to print the caller's stack in a failed call's
      // error; capturing it was 2% of a busy sidecar's CPU, and errors are mapped in errors.ts
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      try {
        const trace = callTrace.current?.();
        fn.call(client, req, trace ? this.withTrace(trace) : this.unaryMetadata, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res as Res)));
      } finally {
        Error.stackTraceLimit = limit;
      }
    });
  }

  duplex<Req, Res>(service: string, method: string): grpc.ClientDuplexStream<Req, Res> {
    const fn = (this.client(service) as unknown as Record<string, Duplex>)[method];
    return fn.call(this.client(service), this.metadata()) as grpc.ClientDuplexStream<Req, Res>;
  }

  /** Calls `onLost` whenever a READY connection drops (the component process died or closed it). */
  watchConnection(onLost: () => void): void {
    let last = this.channel.getConnectivityState(false);
    const watch = () => {
      try {
        this.channel.watchConnectivityState(last, Infinity, onChange);
      } catch {
        // channel closed
      }
    };
    const onChange = (err?: Error) => {
      {
        if (err) return;
        let now: grpc.connectivityState;
        try {
          now = this.channel.getConnectivityState(false);
        } catch {
          return; // channel closed
        }
        if (last === grpc.connectivityState.READY && now !== grpc.connectivityState.READY) onLost();
        last = now;
        if (now !== grpc.connectivityState.SHUTDOWN) watch();
      }
    };
    watch();
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.channel.close();
  }
}
