/**
 * The fast path between sidecars: plain HTTP/1.1 keep-alive on the internal port (which still
 * speaks gRPC to any client that opens with the HTTP/2 preface). The call is the app's own
 * request, with its method, path, query, headers and body as sent, plus the `rt-invoke-*`
 * headers below; the answer is the target app's own, or the callee sidecar's error marked with
 * `rt-invoke-error`. Measured in bench/invoke.bench.ts: a bidi gRPC stream per call cost several
 * times more (docs/service-invocation.md).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { Agent, Pool, type Dispatcher } from '../util/http-client.ts';
import { ApiError, errorBody } from '../http/errors.ts';
import type { IdentityManager } from '../identity/manager.ts';
import { connectAs } from '../identity/tls.ts';
import { DispatchedAnswer } from './answer.ts';
import type { AppGrpcStatus } from './grpc-status.ts';
import { CALLER_APP, CALLER_NS, CALLER_TD, headerObject, isHopHeader, requestHeaders, TARGET } from './headers.ts';
import type { InvokeAnswer, InvokeCall } from './call.ts';
import type { Caller, Header, RequestHead } from './proto.ts';
import type { AppTarget } from './target.ts';

/** On an answer: the callee sidecar (not its app) answers; the body is the API's JSON error. */
const ERROR = 'rt-invoke-error';
/**
 * On the answer of an app that speaks gRPC: its status for a gRPC caller — the code, the message
 * (percent-encoded) and `grpc-status-details-bin` (base64). Status and body are what an HTTP
 * caller gets.
 */
const GRPC_STATUS = 'rt-invoke-grpc-status';
const GRPC_MESSAGE = 'rt-invoke-grpc-message';
const GRPC_DETAILS = 'rt-invoke-grpc-details';
/**
 * On a request: a call of the actor runtime between sidecars (actors/peer-calls.ts), not one for
 * the app. A hop header, so an app's own invocation can never carry it.
 */
export const ACTOR_CALL = 'rt-invoke-actor';

/** An app's headers this hop does not carry (`expect`: undici refuses it; the body just follows). */
const notSentOnHop = (name: string): boolean => isHopHeader(name) || name === 'expect';

// an app's gRPC status details ride the answer's head (GRPC_DETAILS): room for what gRPC's own
// metadata takes, beyond node's 16 KiB default
const POOL = { connections: 256, pipelining: 1, keepAliveTimeout: 30_000, maxHeaderSize: 256 * 1024 } as const;

/**
 * The calling side: one keep-alive pool per target sidecar (TCP: undici's Agent keeps them). With
 * mutual TLS (`identity`), the pool of a target also belongs to the app meant: its connections
 * present this sidecar's certificate and take the peer only if its certificate names that app
 * (namespace and app id, in this trust domain). A connection is made with the certificate in force;
 * after a renewal the pools are retired: calls under way finish on their connections, new calls
 * get new pools and connections that present the new certificate (so no connection outlives the
 * certificate it was made with by more than one renewal).
 */
export class HttpTransport {
  private readonly agent = new Agent(POOL);
  /** Pools per Unix socket (`unix:<path>` addresses), and with mTLS per address and app. */
  private readonly pools = new Map<string, Pool>();
  private readonly identity?: IdentityManager;

  private stopRotation?: () => void;

  constructor(identity?: IdentityManager) {
    this.identity = identity;
    this.stopRotation = identity?.onRotate(() => {
      const retired = [...this.pools.values()];
      this.pools.clear();
      // close() lets the requests under way finish, then ends the connections
      for (const pool of retired) void pool.close().catch(() => undefined);
    });
  }

  private dispatcher(t: AppTarget, address: string): { d: Dispatcher; origin: string } {
    const unix = address.startsWith('unix:') ? address.slice('unix:'.length) : undefined;
    if (!unix && !this.identity) return { d: this.agent, origin: `http://${address}` };
    const origin = unix ? 'http://localhost' : `http://${address}`;
    const key = this.identity ? `${address}#${t.namespace}/${t.appId}` : address;
    let pool = this.pools.get(key);
    if (!pool) {
      const identity = this.identity;
      if (identity) {
        const expected = { trustDomain: identity.id.trustDomain, namespace: t.namespace, appId: t.appId };
        const url = new URL(origin);
        const to = unix ? { path: unix } : { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) };
        const connect = (_o: unknown, cb: (err: Error | null, socket: TLSSocket | null) => void) => connectAs(identity, expected, to, 'http/1.1', cb);
        pool = new Pool(origin, { ...POOL, connect: connect as never });
      } else {
        pool = new Pool(origin, { ...POOL, socketPath: unix });
      }
      this.pools.set(key, pool);
    }
    return { d: pool, origin };
  }

  /** A target that did not answer: its pools go (a restarted sidecar has a new socket anyway). */
  drop(address: string): void {
    for (const [key, pool] of this.pools) {
      if (key !== address && !key.startsWith(`${address}#`)) continue;
      this.pools.delete(key);
      void pool.destroy().catch(() => undefined);
    }
  }

  /** `hop`: headers of this hop only (rt-invoke-…), beside the call's own. */
  async call(t: AppTarget, address: string, caller: Caller, c: InvokeCall, hop?: Record<string, string>): Promise<InvokeAnswer> {
    const appId = t.appId;
    const headers = headerObject(c.headers, notSentOnHop);
    if (hop) Object.assign(headers, hop);
    headers[TARGET] = appId;
    headers[CALLER_APP] = caller.app_id;
    headers[CALLER_NS] = caller.namespace;
    if (caller.trust_domain) headers[CALLER_TD] = caller.trust_domain;
    const { d, origin } = this.dispatcher(t, address);
    const answer = new DispatchedAnswer();
    const signal = c.signal;
    if (signal?.aborted) answer.abort();
    else signal?.addEventListener('abort', () => answer.abort(), { once: true });
    // a slow app is the app's business: no timeouts of this hop's own. A body on a verb undici
    // expects none of (GET, DELETE …) would make it close the connection after the call, in case the
    // server misreads it; the other end is a sidecar's node:http, which frames it by its length
    const reset = c.body !== undefined && c.method !== 'HEAD' ? false : undefined;
    d.dispatch({ origin, method: c.method as Dispatcher.HttpMethod, path: c.path + c.query, headers, body: c.body, reset, headersTimeout: 0, bodyTimeout: 0 }, answer);
    await answer.ready;
    const code = answer.raw[ERROR];
    if (typeof code === 'string') {
      const text = await answer.text();
      let message = text;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? text;
      } catch {
        // not JSON: the text is the message
      }
      throw new ApiError(answer.status, code, code === 'ERR_DIRECT_INVOKE' ? `failed to invoke, id: ${appId}, err: ${message}` : message);
    }
    answer.grpcStatus = grpcStatusOf(answer.raw);
    return answer;
  }

  async close(): Promise<void> {
    this.stopRotation?.();
    await Promise.all([this.agent, ...this.pools.values()].map((d) => d.close().catch(() => undefined)));
    this.pools.clear();
  }
}

/** The receiving side: the request's head, in the shape the gRPC stream carries it. */
export function headOf(req: IncomingMessage): RequestHead | undefined {
  const target = req.headers[TARGET];
  if (typeof target !== 'string') return undefined;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const headers: Header[] = requestHeaders(req.rawHeaders, isHopHeader);
  const str = (name: string) => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : '');
  const len = req.headers['content-length'];
  return {
    method: req.method ?? 'GET',
    path: q < 0 ? url : url.slice(0, q),
    query: q < 0 ? '' : url.slice(q),
    headers,
    caller: { app_id: str(CALLER_APP), namespace: str(CALLER_NS), trust_domain: str(CALLER_TD) },
    target_app_id: target,
    has_body: req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0'),
  };
}

/** The head of the answer of an app that speaks gRPC: its status, for the calling sidecar. */
export function grpcStatusHeaders(s: AppGrpcStatus): Header[] {
  const out = [
    { name: GRPC_STATUS, value: String(s.code) },
    { name: GRPC_MESSAGE, value: encodeURIComponent(s.message.toWellFormed()) },
  ];
  if (s.details?.length) out.push({ name: GRPC_DETAILS, value: s.details.toString('base64') });
  return out;
}

function grpcStatusOf(raw: IncomingHttpHeaders): AppGrpcStatus | undefined {
  const code = raw[GRPC_STATUS];
  if (typeof code !== 'string') return undefined;
  const message = raw[GRPC_MESSAGE];
  const details = raw[GRPC_DETAILS];
  let text = typeof message === 'string' ? message : '';
  try {
    text = decodeURIComponent(text);
  } catch {
    // not percent-encoding after all: the text as it came
  }
  return { code: Number(code), message: text, details: typeof details === 'string' && details ? Buffer.from(details, 'base64') : undefined };
}

/** The callee sidecar's own error answer: the API's JSON error body, marked as the sidecar's. */
export function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { [ERROR]: code, 'content-type': 'application/json' });
  res.end(JSON.stringify(errorBody(code, message)));
}

/**
 * The app's answer, streamed back. pipe() rather than pipeline(): pipeline's clean-up builds an
 * AbortSignal's DOMException per call, a few percent of the callee's CPU in the profile. An answer
 * taken through the dispatch API writes itself (no stream in between).
 */
export function sendAnswer(res: ServerResponse, a: InvokeAnswer, onError: (err: Error) => void): void {
  if (a instanceof DispatchedAnswer) return a.sendTo(res);
  res.writeHead(a.status, headerObject(a.headers));
  a.body.once('error', (err) => {
    // the app broke off mid-answer: the caller must see a cut, not a short body that looks whole
    res.destroy(err);
    onError(err);
  });
  res.once('close', () => {
    if (!a.body.readableEnded) a.body.destroy();
  });
  a.body.pipe(res);
}
