/**
 * The app channel: the sidecar's HTTP client toward its app (job triggers, input-binding
 * events, discovery), plus health probing with the contract's Health options.
 */
import type { Readable } from 'node:stream';
import { Pool, type Dispatcher } from '../util/http-client.ts';
import type { Logger } from 'pino';
import type { SidecarOptions } from '../options.ts';
import type { InputBindingEvent, InputBindingReply } from '../components/types.ts';
import { GrpcApp, grpcCode, UNIMPLEMENTED } from './grpc-app.ts';

export interface AppResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface AppRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'OPTIONS';
  path: string;
  body?: Uint8Array | string;
  headers?: Record<string, string>;
  /** Per-call timeout; default 60 s. */
  timeoutMs?: number;
  /** Aborts the request (a resiliency timeout cancels the call, not only the wait for it). */
  signal?: AbortSignal;
}

export class AppUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AppUnavailableError';
  }
}

export class AppChannel {
  private pool?: Pool;
  private readonly log: Logger;
  private readonly opts: SidecarOptions;
  private healthy = false;
  private failures = 0;
  private probeTimer?: NodeJS.Timeout;
  private readonly healthListeners: ((healthy: boolean) => void)[] = [];
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  /** The app callback client, when the app speaks gRPC (--app-protocol grpc). */
  readonly grpc?: GrpcApp;

  constructor(opts: SidecarOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
    if (opts.appPort > 0) {
      this.pool = new Pool(`http://${hostFor(opts.appChannelAddress)}:${opts.appPort}`, {
        connections: 128,
        pipelining: 1,
        // below the idle limits app servers keep (Node 5 s, uvicorn 5 s): a connection the app
        // is about to close is not reused (undici also honours a Keep-Alive: timeout= hint)
        keepAliveTimeout: 4_000,
      });
      if (opts.appProtocol === 'grpc') this.grpc = new GrpcApp(opts, () => this.slot());
    }
  }

  /** Whether there is an app to talk to at all. */
  get enabled(): boolean {
    return this.pool !== undefined;
  }

  get isHealthy(): boolean {
    return this.healthy;
  }

  onHealthChange(l: (healthy: boolean) => void): void {
    this.healthListeners.push(l);
  }

  async invoke(req: AppRequest): Promise<AppResponse> {
    if (!this.pool) throw new AppUnavailableError('no app channel: the sidecar was started without an app port');
    await this.acquire();
    try {
      const headers: Record<string, string> = { ...req.headers };
      if (this.opts.appApiToken) {
        headers['rt-api-token'] = this.opts.appApiToken;
        headers['dapr-api-token'] = this.opts.appApiToken;
      }
      const timeout = req.timeoutMs ?? 60_000;
      const res = await this.pool.request({
        method: req.method,
        path: req.path.startsWith('/') ? req.path : `/${req.path}`,
        body: req.body as Buffer | string | undefined,
        headers,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: req.signal,
      });
      const body = Buffer.from(await res.body.arrayBuffer());
      const outHeaders: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) outHeaders[k] = Array.isArray(v) ? v.join(', ') : v;
      return { status: res.statusCode, headers: outHeaders, body };
    } catch (e) {
      throw new AppUnavailableError(`app at ${this.opts.appChannelAddress}:${this.opts.appPort} did not answer ${req.method} ${req.path}: ${(e as Error).message}`, { cause: e });
    } finally {
      this.release();
    }
  }

  /**
   * A POST whose answer's body does not matter (job triggers): only the status comes back. It
   * goes through undici's dispatch API, without the response stream and promise chain of
   * request(), which halves the client's cost per call in a burst of thousands. Not async and
   * one handler object per call (no closures): a burst makes thousands of these, and what each
   * allocates is what the 1 MB young generation has to scavenge while the burst lasts.
   */
  post(path: string, body: string | Buffer, headers: Record<string, string>, timeoutMs = 60_000): Promise<number> {
    const pool = this.pool;
    if (!pool) return Promise.reject(new AppUnavailableError('no app channel: the sidecar was started without an app port'));
    if (this.opts.appApiToken) headers = { ...headers, 'rt-api-token': this.opts.appApiToken, 'dapr-api-token': this.opts.appApiToken };
    const send = (): Promise<number> =>
      new Promise<number>((resolve, reject) => {
        const handler = new StatusOnly(this, path, resolve, reject);
        try {
          pool.dispatch({ method: 'POST', path, body, headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
        } catch (e) {
          handler.onResponseError(null, e as Error);
        }
      });
    // without --app-max-concurrency (or with a free slot) the call goes out in this turn
    return this.tryAcquire() ? send() : this.acquire().then(send);
  }

  /** Why a POST to the app failed, as the callers of post() get it. */
  postFailed(path: string, e: Error): AppUnavailableError {
    return new AppUnavailableError(`app at ${this.opts.appChannelAddress}:${this.opts.appPort} did not answer POST ${path}: ${e.message}`, { cause: e });
  }

  /**
   * Service invocation: the body goes to the app as it arrives, and `handler` (undici's dispatch
   * API: no response stream nor promise per call) gets the answer's head and bytes as they come,
   * neither buffered whole. The concurrency slot (--app-max-concurrency) is held until the answer
   * has ended or failed. The caller hands its headers object over (built per call): the app's
   * token goes into it, not into a copy.
   */
  async dispatchInvoke(req: { method: string; path: string; headers: Record<string, string | string[]>; body?: Readable }, handler: Dispatcher.DispatchHandler): Promise<void> {
    if (!this.pool) throw new AppUnavailableError('no app channel: the sidecar was started without an app port');
    await this.acquire();
    const headers = req.headers;
    if (this.opts.appApiToken) {
      headers['rt-api-token'] = this.opts.appApiToken;
      headers['dapr-api-token'] = this.opts.appApiToken;
    }
    const h = this.opts.appMaxConcurrency > 0 ? releasing(handler, () => this.release()) : handler;
    const pool = this.pool;
    const send = (handler: Dispatcher.DispatchHandler) => pool.dispatch({ method: req.method as Dispatcher.HttpMethod, path: req.path, headers, body: req.body }, handler);
    // a request without a body can go out again as it was
    send(req.body === undefined ? againOnStaleSocket(h, send) : h);
  }

  /**
   * One input-binding event to the app: `POST /<binding>` with the data as the body and the
   * metadata as `metadata.<key>` headers, or, for a gRPC app, AppCallback.OnBindingEvent. A gRPC
   * answer counts as 200 with the response's `data` as the body; a failed call as 500 with its
   * message (UNIMPLEMENTED: 404, the app has no handler), so both protocols mean the same to the
   * binding. The response's state/`to` fields (dropped by the ecosystem too) are not read.
   * `trace`: traceparent / tracestate, as headers or gRPC metadata (tracing on).
   */
  async deliverBinding(name: string, event: InputBindingEvent, signal?: AbortSignal, trace?: Record<string, string>): Promise<InputBindingReply> {
    if (this.grpc) {
      try {
        const res = (await this.grpc.call('callback', 'OnBindingEvent', { name, data: Buffer.from(event.data), metadata: event.metadata }, trace)) as { data?: Buffer };
        return { status: 200, body: res.data ?? new Uint8Array() };
      } catch (e) {
        return { status: grpcCode(e) === UNIMPLEMENTED ? 404 : 500, body: Buffer.from((e as Error).message) };
      }
    }
    const res = await this.invoke({
      method: 'POST',
      path: `/${name}`,
      body: event.data,
      headers: { 'content-type': event.contentType ?? 'application/json', ...prefixed(event.metadata), ...trace },
      signal,
    });
    return { status: res.status, body: res.body };
  }

  /** Calls the app with a JSON body. */
  async postJson(path: string, value: unknown, headers: Record<string, string> = {}): Promise<AppResponse> {
    return this.invoke({ method: 'POST', path, body: JSON.stringify(value), headers: { 'content-type': 'application/json', ...headers } });
  }

  /**
   * GET a discovery path: the rt path first, then the ecosystem's whenever the first answer is
   * not `usable` (not 2xx, not JSON, or not the declaration asked for). An app with a catch-all
   * route (a fallback handler, a server mounted on `/`, an auth layer's 401) answers the rt path
   * with something else than 404, and its `/dapr/*` declaration must still count.
   */
  async discover(rtPath: string, fallbackPath: string, usable: (body: unknown) => boolean): Promise<unknown | undefined> {
    for (const path of [rtPath, fallbackPath]) {
      try {
        const res = await this.invoke({ method: 'GET', path, timeoutMs: 5000 });
        if (res.status < 200 || res.status >= 300 || res.body.length === 0) continue;
        const body: unknown = JSON.parse(res.body.toString('utf8'));
        if (usable(body)) return body;
      } catch (e) {
        this.log.debug({ path, err: (e as Error).message }, 'app discovery call failed');
      }
    }
    return undefined;
  }

  /**
   * Waits until the app's port accepts connections (or the health path answers 2xx when
   * health checks are on). Resolves false on timeout.
   */
  async waitUntilReachable(timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (!this.pool) return true;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !signal?.aborted) {
      if (await this.probeOnce()) {
        this.setHealthy(true);
        return true;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  }

  /** Starts periodic health probing (when app health checks are enabled). */
  startHealthProbes(): void {
    if (!this.pool || !this.opts.appHealthCheck) return;
    const tick = async () => {
      const ok = await this.probeOnce();
      if (ok) {
        this.failures = 0;
        this.setHealthy(true);
      } else if (++this.failures >= this.opts.appHealthThreshold) {
        this.setHealthy(false);
      }
      this.probeTimer = setTimeout(tick, this.opts.appHealthProbeIntervalMs);
      this.probeTimer.unref();
    };
    this.probeTimer = setTimeout(tick, this.opts.appHealthProbeIntervalMs);
    this.probeTimer.unref();
  }

  private async probeOnce(): Promise<boolean> {
    if (!this.pool) return true;
    try {
      // a gRPC app cannot answer an HTTP GET: its probe is AppCallbackHealthCheck/HealthCheck
      // (any failure, UNIMPLEMENTED included, is a failed probe)
      if (this.opts.appHealthCheck && this.grpc) {
        return await this.grpc.call('health', 'HealthCheck', {}, {}, this.opts.appHealthProbeTimeoutMs).then(
          () => true,
          () => false,
        );
      }
      if (this.opts.appHealthCheck) {
        const res = await this.pool.request({
          method: 'GET',
          path: this.opts.appHealthCheckPath,
          headersTimeout: this.opts.appHealthProbeTimeoutMs,
          bodyTimeout: this.opts.appHealthProbeTimeoutMs,
        });
        await res.body.dump();
        return res.statusCode >= 200 && res.statusCode < 300;
      }
      // without health checks, "reachable" means the port accepts a TCP connection
      const { connect } = await import('node:net');
      return await new Promise<boolean>((resolve) => {
        const s = connect({ host: hostFor(this.opts.appChannelAddress).replace(/^\[|\]$/g, ''), port: this.opts.appPort });
        const t = setTimeout(() => {
          s.destroy();
          resolve(false);
        }, this.opts.appHealthProbeTimeoutMs);
        s.once('connect', () => {
          clearTimeout(t);
          s.end();
          resolve(true);
        });
        s.once('error', () => {
          clearTimeout(t);
          resolve(false);
        });
      });
    } catch {
      return false;
    }
  }

  private setHealthy(h: boolean): void {
    if (h === this.healthy) return;
    this.healthy = h;
    this.log.info({ healthy: h }, h ? 'app is healthy' : 'app is unhealthy');
    for (const l of this.healthListeners) l(h);
  }

  // maxConcurrency: at most that many calls to the app at once (-1 / 0 = unlimited)
  /**
   * One --app-max-concurrency slot for a call that does not go through this channel's pool (a
   * proxied gRPC call); the function returned frees it, once however often it is called.
   */
  async slot(): Promise<() => void> {
    await this.acquire();
    let freed = false;
    return () => {
      if (!freed) this.release();
      freed = true;
    };
  }

  /** Takes a slot when one is free (or there is no limit); false when the caller must wait. */
  private tryAcquire(): boolean {
    const max = this.opts.appMaxConcurrency;
    if (max <= 0) return true;
    if (this.inFlight < max) {
      this.inFlight++;
      return true;
    }
    return false;
  }

  private async acquire(): Promise<void> {
    if (this.tryAcquire()) return;
    await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight++;
  }

  /** Frees the slot a call held (StatusOnly calls it once its answer ended or failed). */
  release(): void {
    if (this.opts.appMaxConcurrency <= 0) return;
    this.inFlight--;
    this.waiting.shift()?.();
  }

  async close(): Promise<void> {
    if (this.probeTimer) clearTimeout(this.probeTimer);
    await this.grpc?.close();
    await this.pool?.close().catch(() => undefined);
  }
}

/** The handler of one post(): keeps the status, drops the body, frees the slot once at the end. */
class StatusOnly implements Dispatcher.DispatchHandler {
  private status = 0;
  private settled = false;
  private readonly channel: AppChannel;
  private readonly path: string;
  private readonly resolve: (status: number) => void;
  private readonly reject: (e: Error) => void;

  constructor(channel: AppChannel, path: string, resolve: (status: number) => void, reject: (e: Error) => void) {
    this.channel = channel;
    this.path = path;
    this.resolve = resolve;
    this.reject = reject;
  }

  onRequestStart(): void {}

  onResponseStart(_c: unknown, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(): void {}

  onResponseEnd(): void {
    if (this.settled) return;
    this.settled = true;
    this.channel.release();
    this.resolve(this.status);
  }

  onResponseError(_c: unknown, e: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.channel.release();
    this.reject(this.channel.postFailed(this.path, e));
  }
}

/** Errors of a kept-alive connection that the peer had closed, found when reusing it. */
const STALE_SOCKET = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/**
 * Sends the request again, once, when the kept-alive connection it went out on turns out to be
 * closed before any answer came. An app server that closes a connection without saying so
 * (uvicorn after an unhandled error, or at its 5 s idle limit) would otherwise fail the next call
 * with "other side closed". Go's HTTP client, under the reference runtime, does the same.
 */
function againOnStaleSocket(h: Dispatcher.DispatchHandler, send: (h: Dispatcher.DispatchHandler) => void): Dispatcher.DispatchHandler {
  let answered = false;
  let retried = false;
  const self: Dispatcher.DispatchHandler = {
    onRequestStart: (c, context) => h.onRequestStart?.(c, context),
    onResponseStart: (c, status, headers, message) => {
      answered = true;
      h.onResponseStart?.(c, status, headers, message);
    },
    onResponseData: (c, chunk) => h.onResponseData?.(c, chunk),
    onResponseEnd: (c, trailers) => h.onResponseEnd?.(c, trailers),
    onResponseError: (c, err) => {
      if (!answered && !retried && STALE_SOCKET.has((err as { code?: string }).code ?? '')) {
        retried = true;
        send(self);
        return;
      }
      h.onResponseError?.(c, err);
    },
  };
  return self;
}

/** `h`, calling `release` once when its answer has ended or failed. */
function releasing(h: Dispatcher.DispatchHandler, release: () => void): Dispatcher.DispatchHandler {
  let done = false;
  const once = () => {
    if (!done) release();
    done = true;
  };
  return {
    onRequestStart: (c, context) => h.onRequestStart?.(c, context),
    onResponseStart: (c, status, headers, message) => h.onResponseStart?.(c, status, headers, message),
    onResponseData: (c, chunk) => h.onResponseData?.(c, chunk),
    onResponseEnd: (c, trailers) => {
      once();
      h.onResponseEnd?.(c, trailers);
    },
    onResponseError: (c, err) => {
      once();
      h.onResponseError?.(c, err);
    },
  };
}

/** Binding metadata as `metadata.<key>` headers (keys that are no header name are left out). */
function prefixed(md: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(md)) if (/^[A-Za-z0-9-]+$/.test(k)) out[`metadata.${k}`] = v;
  return out;
}

function hostFor(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}
