/**
 * rt's one Kubernetes client (the operator's and the injector's): the few API calls they make, as
 * plain JSON over HTTPS (node:https, one keep-alive agent): get/list/create/patch/delete, and
 * watches read as one JSON event per line. Objects stay plain JSON (no model classes): rt reads a
 * few fields of them. Why not @kubernetes/client-node: docs/ARCHITECTURE.md, "The Kubernetes client".
 */
import { Agent, request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { KubeAccess } from './config.ts';

/** A non-2xx answer: `code` is the HTTP status, `reason` the Status reason (NotFound, Conflict...). */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  constructor(code: number, reason: string, message: string) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

export interface WatchEventLine<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export type Query = Record<string, string | number | boolean | undefined>;

const REQUEST_TIMEOUT_MS = 30_000;

/** A write refused before it was sent: this replica does not hold the leader Lease (leader.ts). */
export class NotLeaderError extends Error {
  constructor(what: string) {
    super(`${what}: not sent, this replica is not the leader`);
    this.name = 'NotLeaderError';
  }
}

export class KubeClient {
  private readonly access: KubeAccess;
  private readonly agent: Agent;
  /** Asked right before every write leaves (see withFence); undefined: writes are not fenced. */
  private readonly fence: (() => boolean) | undefined;
  /** Sent as User-Agent, so the API server's audit log names the replica. */
  private readonly userAgent: string;

  constructor(access: KubeAccess, opts: { userAgent?: string; shareAgentWith?: KubeClient; fence?: () => boolean } = {}) {
    this.access = access;
    this.fence = opts.fence;
    this.userAgent = opts.userAgent ?? opts.shareAgentWith?.userAgent ?? 'rt-operator';
    if (opts.shareAgentWith) {
      this.agent = opts.shareAgentWith.agent;
      return;
    }
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: 32,
      ca: access.ca,
      cert: access.cert,
      key: access.key,
      rejectUnauthorized: access.rejectUnauthorized,
      servername: access.servername,
    });
  }

  get<T>(path: string, query?: Query, accept?: string): Promise<T> {
    return this.request<T>('GET', path, { query, accept });
  }

  create<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, { body });
  }

  /** A JSON merge patch (RFC 7386). */
  mergePatch<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: 'application/merge-patch+json' });
  }

  replace<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', path, { body });
  }

  delete<T>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('DELETE', path, { body });
  }

  /**
   * The same client, whose writes (anything but GET) are sent only while `allowed()` holds, asked
   * at the moment each request leaves: a leader that lost its Lease while a reconcile was under
   * way (or while the process was stopped) never lands a write after it.
   */
  withFence(allowed: () => boolean): KubeClient {
    return new KubeClient(this.access, { shareAgentWith: this, fence: allowed });
  }

  request<T>(method: string, path: string, opts: { query?: Query; body?: unknown; contentType?: string; timeoutMs?: number; accept?: string } = {}): Promise<T> {
    if (this.fence && method !== 'GET' && !this.fence()) return Promise.reject(new NotLeaderError(`${method} ${path}`));
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const timeoutMs = opts.timeoutMs ?? REQUEST_TIMEOUT_MS;
    return new Promise<T>((resolvePromise, reject) => {
      // an explicit length: Node sends a DELETE's body without one, and the server then reads it as the next request
      const headers: Record<string, string> = payload ? { 'content-type': opts.contentType ?? 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {};
      if (opts.accept) headers.accept = opts.accept;
      const req = request(this.url(path, opts.query), this.options(method, headers), (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) >= 300) return reject(apiError(res, text, `${method} ${path}`));
          try {
            resolvePromise((text ? JSON.parse(text) : {}) as T);
          } catch {
            reject(new Error(`${method} ${path}: the API server answered with no JSON`));
          }
        });
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path} timed out after ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /**
   * One watch request: `onEvent` for each event line; resolves when the server ends the watch
   * (its timeoutSeconds), rejects on an HTTP error, a network error or `signal`.
   */
  watch<T>(path: string, query: Query, onEvent: (e: WatchEventLine<T>) => void, signal: AbortSignal, accept?: string): Promise<void> {
    return new Promise<void>((resolvePromise, reject) => {
      const req = request(this.url(path, { ...query, watch: true }), { ...this.options('GET', accept ? { accept } : {}), signal }, (res) => {
        if ((res.statusCode ?? 0) >= 300) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => reject(apiError(res, Buffer.concat(chunks).toString('utf8'), `watch ${path}`)));
          return;
        }
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          buf += d;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line.trim()) onEvent(JSON.parse(line) as WatchEventLine<T>);
          }
        });
        res.on('end', () => resolvePromise());
        res.on('error', reject);
        res.on('aborted', () => reject(new Error(`watch ${path}: connection lost`)));
      });
      // a silent connection (no event, no bookmark) for longer than the server-side timeout is dead
      const idle = Number(query.timeoutSeconds ?? 300) * 1000 + REQUEST_TIMEOUT_MS;
      req.setTimeout(idle, () => req.destroy(new Error(`watch ${path}: no data for ${idle} ms`)));
      req.on('error', reject);
      req.end();
    });
  }

  close(): void {
    if (!this.fence) this.agent.destroy();
  }

  private url(path: string, query?: Query): URL {
    const u = new URL(this.access.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  private options(method: string, headers: Record<string, string>): RequestOptions {
    const token = this.access.token();
    return { method, agent: this.agent, headers: { accept: 'application/json', 'user-agent': this.userAgent, ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) } };
  }
}

function apiError(res: IncomingMessage, text: string, what: string): ApiError {
  let reason = res.statusMessage ?? '';
  let message = text.slice(0, 500);
  try {
    const status = JSON.parse(text) as { reason?: string; message?: string };
    reason = status.reason ?? reason;
    message = status.message ?? message;
  } catch {
    // not a Status object
  }
  return new ApiError(res.statusCode ?? 0, reason, `${what}: ${res.statusCode} ${message}`);
}

/** True for the 404 of an object that is gone. */
export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
