/**
 * The receiving side of service invocation: the internal port (50002 on a cluster, a free one
 * standalone). One TCP port, two protocols told apart by the first bytes of a connection:
 *  - the HTTP/2 preface → gRPC: the `CallStream` service (proto/invoke.proto), and gRPC calls of
 *    any other method, proxied to this sidecar's gRPC app (grpc-proxy.ts);
 *  - anything else → HTTP/1.1 keep-alive, the fast path sidecars call each other on (internal-http.ts).
 * With mutual TLS (a workload identity), the port is TLS only: a client must present a
 * certificate of the trust bundle, ALPN says the protocol (`h2` → gRPC, else HTTP/1.1), and the
 * caller is the workload the peer's certificate names: a call whose caller head says otherwise is
 * refused, and one without a caller gets the certificate's.
 * A call is checked against the Configuration's accessControl, then handed to this sidecar's app
 * through the app channel, which adds the app's API token and holds --app-max-concurrency.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { createServer as createTlsServer, type PeerCertificate, type Server as TlsServer, TLSSocket } from 'node:tls';
import type { Duplex, Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import { GrpcServer } from '../grpc/server.ts';
import { answerClientError } from '../http/client-error.ts';
import type { IdentityManager } from '../identity/manager.ts';
import { certificateWorkload, spiffeUri, type WorkloadId } from '../../../shared/spiffe.ts';
import { serverTlsOptions } from '../identity/tls.ts';
import { invokeGrpcApp } from './grpc-app-invoke.ts';
import { calleeProxy, Channels, type PeerCall } from './grpc-proxy.ts';
import { DispatchedAnswer } from './answer.ts';
import { headerObject } from './headers.ts';
import { ACTOR_CALL, grpcStatusHeaders, headOf, sendAnswer, sendError } from './internal-http.ts';
import { ApiError } from '../http/errors.ts';
import type { ActorCallHandler } from './internal-actors.ts';
import type { InvokeAnswer } from './call.ts';
import { internalService, type InvokeChunk, type RequestHead, type ResponseHead } from './proto.ts';
import { splitHead, writeBody } from './stream.ts';
import { tracedAppCall } from '../tracing/invoke.ts';
import type { TracingService } from '../tracing/service.ts';

/** Decides whether a caller may make a call; a string is the reason it may not. */
export type AccessCheck = (head: RequestHead) => string | undefined;

export interface InternalServerOptions {
  appId: string;
  namespace: string;
  app: AppChannel;
  log: Logger;
  access: AccessCheck;
  /** host:port of the app's gRPC server, when it speaks gRPC (--app-protocol grpc): proxied calls go there. */
  grpcApp?: string;
  appApiToken?: string;
  /** Mutual TLS: the port serves TLS only, with this identity's certificate, once it has one. */
  identity?: IdentityManager;
  /** A SERVER span per call handed to the app, when tracing is on. */
  tracing?: TracingService;
}

/** Why the callee sidecar refuses a call itself (before its app sees it). */
type Refusal = Pick<ResponseHead, 'status' | 'error_code' | 'message'>;

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0');
const SNIFF_TIMEOUT_MS = 10_000;

export class InternalServer {
  // the same server class as the public gRPC port, without its API token: callers are sidecars
  readonly grpc: GrpcServer;
  private readonly o: InternalServerOptions;
  private readonly http1 = createHttpServer({ keepAliveTimeout: 60_000 }, (req, res) => void this.serveHttp(req, res));
  private readonly net: NetServer;
  private readonly channels = new Channels();
  private readonly sockets = new Set<Socket>();
  private unix?: { server: NetServer; path: string };
  private tls?: TlsServer;
  /** The workload each TLS connection's certificate names (null: none), read once per connection. */
  private readonly peers = new WeakMap<object, WorkloadId | null>();
  private stopRotation?: () => void;
  private closed = false;
  private actorCalls?: ActorCallHandler;

  constructor(o: InternalServerOptions) {
    this.o = o;
    this.grpc = new GrpcServer(o.log);
    this.grpc.addService(() => ({ definition: internalService(), implementation: { CallStream: (call: grpc.ServerDuplexStream<InvokeChunk, InvokeChunk>) => void this.serveStream(call) } }));
    // gRPC calls of any other method are proxied calls for this sidecar's gRPC app
    this.grpc.setFallback(calleeProxy({ appId: o.appId, appAddress: o.grpcApp, appApiToken: o.appApiToken, slot: () => o.app.slot(), refuse: (h, call) => this.refuse(h, this.callPeer(call)), tracing: o.tracing }, this.channels));
    this.net = createNetServer({ noDelay: true }, (s) => this.accept(s));
    this.http1.on('clientError', answerClientError(o.log));
  }

  /** Calls marked ACTOR_CALL go to `handler` rather than the app (the actor runtime's calls between hosts). */
  serveActorCalls(handler: ActorCallHandler): void {
    this.actorCalls = handler;
  }

  /** With mTLS, waits for the identity's first certificate: the port does not serve without one. */
  async listen(address: string, port: number): Promise<number> {
    if (this.o.identity) await this.secure(this.o.identity);
    if (this.closed) throw new Error('the internal port was closed before its first certificate came');
    return new Promise((resolve, reject) => {
      this.net.once('error', reject);
      this.net.listen(port, address, () => {
        this.net.off('error', reject);
        resolve((this.net.address() as { port: number }).port);
      });
    });
  }

  /**
   * Standalone: the same port on a Unix socket too, which sidecars of one machine call instead of
   * TCP (a loopback TCP write costs the kernel more, and each call makes two). Undefined when it
   * cannot listen there (the path is too long, a platform without them): TCP serves alone.
   */
  async listenUnix(path: string): Promise<string | undefined> {
    if (process.platform === 'win32' || Buffer.byteLength(path) > 100) return undefined;
    if (this.o.identity) await this.secure(this.o.identity);
    const server = createNetServer({ noDelay: true }, (s) => this.accept(s));
    try {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      rmSync(path, { force: true }); // a socket file left by a crashed sidecar of the same name
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path, () => resolve());
      });
    } catch (e) {
      this.o.log.debug({ path, err: (e as Error).message }, 'no Unix socket for the internal port');
      return undefined;
    }
    this.unix = { server, path };
    return path;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopRotation?.();
    // net.Server.close waits for every connection: callers keep theirs open (keep-alive, HTTP/2)
    const closed = Promise.all([this.net, this.unix?.server].map((s) => new Promise<void>((r) => (s ? s.close(() => r()) : r()))));
    this.http1.closeAllConnections();
    await this.grpc.close();
    for (const s of this.sockets) s.destroy();
    await closed;
    if (this.unix) rmSync(this.unix.path, { force: true });
    this.channels.close();
  }

  /** The TLS server of the identity; a renewed certificate replaces its context (connections made before go on). */
  private async secure(identity: IdentityManager): Promise<void> {
    if (this.tls) return;
    const first = await identity.ready();
    if (this.tls) return;
    const tls = createTlsServer({ ...serverTlsOptions(first), requestCert: true, rejectUnauthorized: true, ALPNProtocols: ['h2', 'http/1.1'], handshakeTimeout: SNIFF_TIMEOUT_MS }, (s) => this.secured(s));
    // a client without a certificate of the trust bundle, or one that does not speak TLS, ends here
    tls.on('tlsClientError', (e, s) => {
      this.o.log.debug({ err: e.message, remote: s.remoteAddress }, 'internal port: TLS handshake refused');
      s.destroy();
    });
    this.stopRotation = identity.onRotate((svid) => tls.setSecureContext(serverTlsOptions(svid)));
    // a renewal between ready() and here
    if (identity.current && identity.current !== first) tls.setSecureContext(serverTlsOptions(identity.current));
    this.tls = tls;
  }

  private accept(socket: Socket): void {
    if (!this.tls) return this.sniff(socket);
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    this.tls.emit('connection', socket);
  }

  /** A TLS connection whose client certificate verified: ALPN says which protocol it speaks. */
  private secured(socket: TLSSocket): void {
    this.peers.set(socket, certificateWorkload(socket.getPeerCertificate()) ?? null);
    socket.on('error', () => socket.destroy());
    if (socket.alpnProtocol === 'h2') this.grpc.inject(socket);
    else this.http1.emit('connection', socket);
  }

  private callPeer(call: PeerCall): WorkloadId | null | undefined {
    if (!this.o.identity) return undefined;
    return certificateWorkload(call.getAuthContext().sslPeerCertificate as PeerCertificate | undefined) ?? null;
  }

  private socketPeer(socket: object): WorkloadId | null | undefined {
    if (!this.o.identity) return undefined;
    return this.peers.get(socket) ?? (socket instanceof TLSSocket ? (certificateWorkload(socket.getPeerCertificate()) ?? null) : null);
  }

  /** Reads until the first bytes say which protocol the connection speaks, then hands it over. */
  private sniff(socket: Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    let seen = Buffer.alloc(0);
    // a connection that never says which protocol it speaks is not kept
    const idle = setTimeout(() => socket.destroy(), SNIFF_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const h2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (h2 && n < H2_PREFACE.length) return; // too few bytes to tell yet
      clearTimeout(idle);
      socket.off('data', onData);
      socket.pause();
      socket.unshift(seen);
      if (h2) this.grpc.inject(socket);
      else this.http1.emit('connection', socket);
      process.nextTick(() => socket.resume());
    };
    socket.on('data', onData);
    socket.on('error', () => socket.destroy());
    socket.once('close', () => clearTimeout(idle));
  }

  /**
   * With mTLS the caller is the peer's certificate: a head that names another is refused, an
   * empty one is filled in. undefined when the call may go on.
   */
  private verifyCaller(head: RequestHead, peer: WorkloadId | null | undefined): Refusal | undefined {
    if (peer === undefined) return undefined; // plaintext: the head is believed
    if (peer === null) return { status: 403, error_code: 'ERR_DIRECT_INVOKE', message: 'the peer certificate names no workload (no SPIFFE ID): caller unknown, call refused' };
    const c = head.caller ?? { app_id: '', namespace: '', trust_domain: '' };
    const wrong = (
      [
        ['app id', c.app_id, peer.appId],
        ['namespace', c.namespace, peer.namespace],
        ['trust domain', c.trust_domain, peer.trustDomain],
      ] as const
    ).find(([, said, is]) => said !== '' && said !== is);
    if (wrong) return { status: 403, error_code: 'ERR_DIRECT_INVOKE', message: `the call names its caller's ${wrong[0]} "${wrong[1]}", but the caller's certificate is ${spiffeUri(peer)}: call refused` };
    head.caller = { app_id: peer.appId, namespace: peer.namespace, trust_domain: peer.trustDomain };
    return undefined;
  }

  /** undefined when the call may go on to the app (`head.caller` taken from the peer's certificate with mTLS). */
  private refuse(head: RequestHead, peer: WorkloadId | null | undefined): Refusal | undefined {
    const forged = this.verifyCaller(head, peer);
    if (forged) return forged;
    if (head.target_app_id !== this.o.appId) {
      return { status: 500, error_code: 'ERR_DIRECT_INVOKE', message: `this sidecar serves app id "${this.o.appId}", not "${head.target_app_id}" (a stale registry entry or DNS record?)` };
    }
    const denied = this.o.access(head);
    if (denied) return { status: 403, error_code: 'ERR_DIRECT_INVOKE', message: denied };
    if (!this.o.app.enabled) return { status: 500, error_code: 'ERR_DIRECT_INVOKE', message: `app "${this.o.appId}" has no app port: its sidecar was started without --app-port` };
    return undefined;
  }

  /** The app's answer; an HTTP app's comes through the dispatch API into `answer`. */
  private async callApp(head: RequestHead, body: Readable | undefined, signal?: AbortSignal, answer = new DispatchedAnswer()): Promise<InvokeAnswer> {
    if (this.o.tracing) return tracedAppCall(this.o.tracing, this.o.appId, head, () => this.callAppNow(head, body, signal, answer));
    return this.callAppNow(head, body, signal, answer);
  }

  private async callAppNow(head: RequestHead, body: Readable | undefined, signal: AbortSignal | undefined, answer: DispatchedAnswer): Promise<InvokeAnswer> {
    const grpcApp = this.o.app.grpc;
    if (grpcApp) return invokeGrpcApp(grpcApp, head, body, { 'rt-caller-app-id': head.caller?.app_id ?? '', 'dapr-caller-app-id': head.caller?.app_id ?? '', 'rt-callee-app-id': this.o.appId, 'dapr-callee-app-id': this.o.appId });
    if (signal?.aborted) answer.abort();
    else signal?.addEventListener('abort', () => answer.abort(), { once: true });
    const headers = headerObject(head.headers);
    headers['rt-caller-app-id'] = headers['dapr-caller-app-id'] = head.caller?.app_id ?? '';
    headers['rt-callee-app-id'] = headers['dapr-callee-app-id'] = this.o.appId;
    await this.o.app.dispatchInvoke({ method: head.method, path: head.path + head.query, headers, body }, answer);
    return answer.ready;
  }

  private failure(e: unknown): string {
    this.o.log.debug({ err: (e as Error).message }, 'invocation failed');
    return `app "${this.o.appId}" did not answer: ${(e as Error).message}`;
  }

  private async serveHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const head = headOf(req);
    if (!head) return sendError(res, 400, 'ERR_MALFORMED_REQUEST', 'not a call between rt sidecars: the rt-invoke-target header is missing');
    if (req.headers[ACTOR_CALL] !== undefined) return this.serveActorCall(head, req, res);
    const refused = this.refuse(head, this.socketPeer(req.socket));
    if (refused) return sendError(res, refused.status, refused.error_code, refused.message);
    const answer = new DispatchedAnswer();
    let gone = false;
    // the caller went away before the whole answer was sent: stop the app's request too
    res.once('close', () => {
      if (res.writableFinished) return;
      gone = true;
      answer.abort();
    });
    let a: InvokeAnswer;
    try {
      a = await this.callApp(head, head.has_body ? req : undefined, undefined, answer);
    } catch (e) {
      if (!gone) sendError(res, 500, 'ERR_DIRECT_INVOKE', this.failure(e));
      return;
    }
    // an app that speaks gRPC: its status rides the head, for a gRPC caller on the other side
    if (a.grpcStatus) a = { ...a, headers: [...a.headers, ...grpcStatusHeaders(a.grpcStatus)] };
    sendAnswer(res, a, (err) => {
      if (!gone) this.failure(err);
    });
  }

  /**
   * A forwarded actor call: from a sidecar of this trust domain (with mTLS, its certificate says
   * so) meaning this app. Not the app's accessControl: that rules calls of the app's methods.
   */
  private async serveActorCall(head: RequestHead, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const peer = this.socketPeer(req.socket);
    const refused = this.verifyCaller(head, peer);
    if (refused) return sendError(res, refused.status, refused.error_code, refused.message);
    const td = this.o.identity?.id.trustDomain;
    if (peer && td !== undefined && peer.trustDomain !== td) return sendError(res, 403, 'ERR_DIRECT_INVOKE', `actor calls come from sidecars of trust domain "${td}", not "${peer.trustDomain}": call refused`);
    if (head.target_app_id !== this.o.appId) return sendError(res, 500, 'ERR_DIRECT_INVOKE', `this sidecar serves app id "${this.o.appId}", not "${head.target_app_id}"`);
    if (!this.actorCalls) return sendError(res, 500, 'ERR_ACTOR_RUNTIME_NOT_FOUND', `the sidecar of app "${this.o.appId}" runs no actor runtime`);
    try {
      const a = await this.actorCalls(head, head.has_body ? req : undefined);
      sendAnswer(res, a, (err) => void this.failure(err));
    } catch (e) {
      if (e instanceof ApiError) sendError(res, e.status, e.errorCode, e.message);
      else sendError(res, 500, 'ERR_ACTOR_INVOKE_METHOD', this.failure(e));
    }
  }

  /** The same call over the gRPC stream (CallStream), for gRPC clients of this port. */
  private async serveStream(call: grpc.ServerDuplexStream<InvokeChunk, InvokeChunk>): Promise<void> {
    const abort = new AbortController();
    let finished = false;
    // grpc-js reports 'cancelled' after a call that ended normally too: only a live call is aborted
    call.on('cancelled', () => {
      if (!finished) abort.abort();
    });
    let headSent = false;
    const answer = (head: Partial<ResponseHead>) => {
      headSent = true;
      call.write({ response: { status: 500, headers: [], error_code: '', message: '', ...head } });
    };
    try {
      const split = await splitHead(call as unknown as Duplex);
      const head = split.head?.request;
      if (!head) {
        call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'the first message of a call must be its request head' });
        return;
      }
      const refused = this.refuse(head, this.callPeer(call));
      if (refused) {
        answer(refused);
        call.end();
        return;
      }
      const res = await this.callApp(head, head.has_body ? split.body : undefined, abort.signal);
      const g = res.grpcStatus;
      answer({ status: res.status, headers: res.headers, grpc_status: g ? { code: g.code, message: g.message, details: g.details ?? Buffer.alloc(0) } : null });
      await writeBody(res.body, call as unknown as Duplex);
      finished = true;
      call.end();
    } catch (e) {
      if (abort.signal.aborted) return; // the caller went away: nobody to tell
      const message = this.failure(e);
      if (!headSent) {
        answer({ error_code: 'ERR_DIRECT_INVOKE', message });
        call.end();
      } else {
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: message });
      }
    }
  }
}
