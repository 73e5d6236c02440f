/**
 * An HTTP answer taken through undici's dispatch API instead of `request()`: no response stream,
 * AbortSignal listeners nor promise chain per call (the callee and the calling sidecar each make
 * one such call per invocation; bench/invoke.bench.ts). Its status and headers come as soon as
 * they arrive; its bytes go either straight into a node ServerResponse (`sendTo`: the HTTP routes,
 * the callee's answer to the calling sidecar) or, for whoever reads `body` (gRPC InvokeService,
 * the gRPC app path), into a Readable made on first use.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { HOP_BY_HOP } from './headers.ts';
import type { AppGrpcStatus } from './grpc-status.ts';
import type { InvokeAnswer } from './call.ts';
import type { Header } from './proto.ts';

/** Bytes kept while nobody consumes the answer yet; past this the connection is paused. */
const HELD_MAX = 64 * 1024;

/**
 * Headers not passed on: hop-by-hop ones, and the sidecars' own `rt-invoke-*` (internal-http.ts),
 * which an app cannot forge either.
 */
const notPassedOn = (name: string): boolean => HOP_BY_HOP.has(name) || name.startsWith('rt-invoke-');

export class DispatchedAnswer implements InvokeAnswer, Dispatcher.DispatchHandler {
  status = 0;
  /** The answer's headers as undici parsed them (lower-case names, arrays for repeats). */
  raw: IncomingHttpHeaders = {};
  /** The target app's gRPC status, when it speaks gRPC (read off the hop by internal-http.ts). */
  grpcStatus?: AppGrpcStatus;
  /** Resolves with this answer once its head is in; rejects when the call fails before that. */
  readonly ready: Promise<this>;
  private resolve!: (a: this) => void;
  private reject!: (e: Error) => void;
  private controller?: Dispatcher.DispatchController;
  private held: Buffer[] = [];
  private heldBytes = 0;
  private ended = false;
  private failure?: Error;
  private res?: ServerResponse;
  private stream?: Readable;
  /** Whether the head is in: a failure after it cuts the answer, one before it rejects `ready`. */
  private headed = false;

  constructor() {
    this.ready = new Promise<this>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // a call cut off before anyone awaits it (the caller left while the app's concurrency slot
    // was awaited) is no unhandled rejection; whoever awaits `ready` later still sees the error
    this.ready.catch(() => undefined);
  }

  /** Stops the call (the caller went away); harmless once it has ended. */
  abort(reason: Error = new Error('the caller went away')): void {
    if (this.ended || this.failure) return;
    if (this.controller) this.controller.abort(reason);
    else this.onResponseError(undefined, reason);
  }

  get headers(): Header[] {
    const out: Header[] = [];
    for (const name in this.raw) {
      const v = this.raw[name];
      if (v === undefined || notPassedOn(name)) continue;
      if (Array.isArray(v)) for (const value of v) out.push({ name, value });
      else out.push({ name, value: v });
    }
    return out;
  }

  /** The headers to answer with (hop-by-hop and rt-invoke-* ones left out), in the object shape node takes. */
  outgoingHeaders(): OutgoingHttpHeaders {
    const out: OutgoingHttpHeaders = {};
    for (const name in this.raw) if (!notPassedOn(name)) out[name] = this.raw[name];
    return out;
  }

  /** The body as a stream, for readers that want one (made on first use, once). */
  get body(): Readable {
    if (this.stream) return this.stream;
    const s = new Readable({
      read: () => this.controller?.resume(),
      // a reader that gives up on the body stops the call, as undici's own body stream does
      destroy: (err, done) => {
        if (!this.ended) this.abort(err ?? new Error('the answer was not read to its end'));
        done(err);
      },
    });
    // nobody may read a body (an error answer's): its failure must not crash the sidecar
    s.on('error', () => undefined);
    this.stream = s;
    for (const b of this.held) s.push(b);
    this.held = [];
    if (this.failure) s.destroy(this.failure);
    else if (this.ended) s.push(null);
    return s;
  }

  /** Writes the answer into `res` (status, headers, then the bytes as they come, with backpressure). */
  sendTo(res: ServerResponse, status = this.status, headers = this.outgoingHeaders()): void {
    this.res = res;
    res.writeHead(status, headers);
    const held = this.held;
    this.held = [];
    if (this.failure) return void res.destroy(this.failure);
    // the usual small answer is already whole: head and body leave in one write
    if (this.ended) return void (held.length === 1 ? res.end(held[0]) : (held.forEach((b) => res.write(b)), res.end()));
    for (const b of held) res.write(b);
    if (this.controller?.paused && res.writableLength < HELD_MAX) this.controller.resume();
  }

  /** Reads the whole body as text (error answers), and stops holding the bytes. */
  text(): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = this.body;
      const parts: Buffer[] = [];
      s.on('data', (b: Buffer) => parts.push(b));
      s.once('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      s.once('error', reject);
    });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // abort() came first: the call never starts
    if (this.failure) controller.abort(this.failure);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx heads (100 Continue) are not the answer
    if (statusCode < 200) return;
    this.controller = controller;
    this.status = statusCode;
    this.raw = headers;
    this.headed = true;
    this.resolve(this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.res) {
      if (!this.res.write(chunk)) {
        controller.pause();
        this.res.once('drain', () => controller.resume());
      }
    } else if (this.stream) {
      if (!this.stream.push(chunk)) controller.pause();
    } else {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      if (this.heldBytes > HELD_MAX) controller.pause();
    }
  }

  onResponseEnd(): void {
    this.ended = true;
    if (this.res) this.res.end();
    else this.stream?.push(null);
  }

  onResponseError(_controller: unknown, err: Error): void {
    if (this.failure || this.ended) return;
    this.failure = err;
    if (!this.headed) return this.reject(err);
    // cut off mid-answer: the reader must see a cut, not a short body that looks whole
    if (this.res) this.res.destroy(err);
    else this.stream?.destroy(err);
  }
}
