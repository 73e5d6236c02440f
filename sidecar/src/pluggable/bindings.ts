/**
 * A pluggable binding: OutputBinding (invoke, operations from ListOperations) and/or
 * InputBinding (the Read stream: events go to the app, the app's answer goes back as the ack),
 * whichever the socket serves. The registry tells input from output by `start` / `invoke`, so
 * those are only set when the socket serves the service.
 */
import type * as grpc from '@grpc/grpc-js';
import { bindingDataBytes, type BindingRequest, type BindingResponse } from '../components/types.ts';
import { Backoff } from '../../../shared/backoff.ts';
import { SERVICES } from './apis.ts';
import { PluggableComponent } from './component.ts';

interface ReadResponse {
  data: Buffer;
  metadata: Record<string, string>;
  contentType: string;
  messageId: string;
}
interface ReadRequest {
  messageId: string;
  responseData?: Buffer;
  responseError?: { message: string } | null;
}

/** Reopening a read stream that ended: 100 ms doubling to 5 s. */
const REOPEN_BACKOFF = { initialMs: 100, maxMs: 5000 };

export class PluggableBinding extends PluggableComponent {
  protected readonly api = 'bindings';
  private ops: string[] = [];
  private reader: grpc.ClientDuplexStream<ReadRequest, ReadResponse> | undefined;
  private reading = false;
  private readonly reopen = new Backoff(REOPEN_BACKOFF);
  private reopenTimer: NodeJS.Timeout | undefined;
  /** Set when the socket serves OutputBinding. */
  invoke?: (req: BindingRequest) => Promise<BindingResponse>;
  operations?: () => string[];
  /** Set when the socket serves InputBinding. */
  start?: () => Promise<void>;

  private get input(): boolean {
    return this.services.has(SERVICES.InputBinding);
  }

  private get output(): boolean {
    return this.services.has(SERVICES.OutputBinding);
  }

  protected async initialize(): Promise<void> {
    if (this.output) {
      await this.conn.unary(SERVICES.OutputBinding, 'Init', this.initRequest());
      this.ops = (await this.conn.unary<{ operations: string[] }>(SERVICES.OutputBinding, 'ListOperations', {})).operations;
      this.invoke = (req) => this.invokeImpl(req);
      this.operations = () => [...this.ops];
    }
    if (this.input) {
      await this.conn.unary(SERVICES.InputBinding, 'Init', this.initRequest());
      this.start ??= async () => {
        this.reading = true;
        this.openReader();
      };
    }
  }

  constructor(...args: ConstructorParameters<typeof PluggableComponent>) {
    super(...args);
    // a restarted component lost its Read stream: open it again
    this.onRecovered(() => {
      if (this.reading && !this.reader) this.openReader();
    });
  }

  protected pingService(): string {
    return this.output ? SERVICES.OutputBinding : SERVICES.InputBinding;
  }

  capabilities(): string[] {
    return [...(this.input ? ['INPUT_BINDING'] : []), ...(this.output ? ['OUTPUT_BINDING'] : [])];
  }

  private async invokeImpl(req: BindingRequest): Promise<BindingResponse> {
    const res = await this.call<{ data: Buffer; metadata: Record<string, string>; contentType: string }>(SERVICES.OutputBinding, 'Invoke', {
      data: Buffer.from(bindingDataBytes(req.data)),
      metadata: req.metadata,
      operation: req.operation,
    });
    const out: BindingResponse = { metadata: res.metadata };
    // an empty answer is "no content", as for built-in bindings
    if (res.data.length > 0) out.data = new Uint8Array(res.data.buffer, res.data.byteOffset, res.data.byteLength);
    if (res.contentType) out.contentType = res.contentType;
    return out;
  }

  /** Opens the Read stream; each event goes to the app and its answer is sent back as the ack. */
  private openReader(): void {
    if (!this.reading || this.reader) return;
    const stream = this.conn.duplex<ReadRequest, ReadResponse>(SERVICES.InputBinding, 'Read');
    this.reader = stream;
    stream.on('data', (ev: ReadResponse) => {
      this.reopen.reset();
      void this.deliver(stream, ev);
    });
    const ended = (err?: Error) => {
      if (this.reader !== stream) return;
      this.reader = undefined;
      if (!this.reading) return;
      this.host.log.warn({ component: this.spec.name }, `input binding "${this.spec.name}": read stream ended (${err?.message ?? 'closed by the component'}); reopening`);
      clearTimeout(this.reopenTimer);
      // while the component is down, the reconnect (after Init again) reopens the stream instead
      this.reopenTimer = setTimeout(() => this.isHealthy() && this.openReader(), this.reopen.next());
      this.reopenTimer.unref();
    };
    stream.on('error', ended);
    stream.on('end', () => ended());
  }

  private async deliver(stream: grpc.ClientDuplexStream<ReadRequest, ReadResponse>, ev: ReadResponse): Promise<void> {
    const ack: ReadRequest = { messageId: ev.messageId };
    try {
      if (!this.ctx.deliverToApp) throw new Error('no app to deliver to');
      const reply = await this.ctx.deliverToApp(this.spec.name, { data: ev.data, metadata: ev.metadata, contentType: ev.contentType || undefined });
      if (reply.status >= 200 && reply.status < 300) ack.responseData = Buffer.from(reply.body);
      else ack.responseError = { message: `the app answered ${reply.status}` };
    } catch (e) {
      ack.responseError = { message: `delivery to the app failed: ${(e as Error).message}` };
    }
    if (this.reader === stream && stream.writable) stream.write(ack);
  }

  override async close(): Promise<void> {
    this.reading = false;
    clearTimeout(this.reopenTimer);
    this.reader?.cancel();
    this.reader = undefined;
    await super.close();
  }
}
