/**
 * gRPC proxying, for apps that speak gRPC: an app calls ANY method on its sidecar's gRPC port
 * with the metadata `rt-app-id` (or `dapr-app-id`); the sidecar forwards the call — unary or
 * streaming, messages as raw bytes, no proto knowledge — to the target's sidecar (the internal
 * port's gRPC side), which calls its app's gRPC server (--app-protocol grpc). Messages, headers,
 * status and trailers come back unchanged.
 */
import type { PeerCertificate } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { GrpcServer } from '../grpc/server.ts';
import type { IdentityManager } from '../identity/manager.ts';
import { expectPeer, grpcClientCredentials } from '../identity/tls.ts';
// the hop's metadata has the names of the HTTP/1.1 hop's headers
import { CALLER_APP, CALLER_NS, CALLER_TD, isHopHeader, TARGET } from './headers.ts';
import { PEER_CHANNEL_OPTIONS, type Caller, type RequestHead } from './proto.ts';
import { ResolveError, type Resolver } from './resolve.ts';
import { parseAppTarget, type AppTarget } from './target.ts';
import { endProxiedCall, proxiedCallSpan } from '../tracing/grpc-proxy.ts';
import type { TracingService } from '../tracing/service.ts';

type Call = grpc.ServerDuplexStream<Buffer, Buffer>;
/** A server call's TLS peer (grpc-js does not export its AuthContext type). */
export type PeerCall = { getAuthContext(): { sslPeerCertificate?: PeerCertificate } };
type Out = grpc.ClientDuplexStream<Buffer, Buffer>;

const raw = (b: Buffer) => b;
/** Trailer of an UNAVAILABLE status that comes from the target app, not its sidecar. */
const APP_DOWN = 'rt-invoke-app-unavailable';
/** Never passed on: routing, and each side's own tokens. */
const DROP = ['rt-app-id', 'dapr-app-id', 'rt-api-token', 'dapr-api-token'];

/** Credentials toward each app's sidecars, one per identity and app (grpc-js shares connections of equal credentials). */
const peerCredentials = new WeakMap<IdentityManager, Map<string, grpc.ChannelCredentials>>();

/**
 * A channel to another sidecar's internal port. With mutual TLS it presents this sidecar's
 * certificate (the one in force when each connection is made) and takes the peer only when its
 * certificate names `t` in this trust domain.
 */
export function peerChannel<C extends grpc.Client>(Ctor: new (address: string, creds: grpc.ChannelCredentials, options: grpc.ChannelOptions) => C, address: string, t: AppTarget, identity?: IdentityManager): C {
  if (!identity) return new Ctor(address, grpc.credentials.createInsecure(), PEER_CHANNEL_OPTIONS);
  let byApp = peerCredentials.get(identity);
  if (!byApp) peerCredentials.set(identity, (byApp = new Map()));
  const key = `${t.namespace}/${t.appId}`;
  let creds = byApp.get(key);
  if (!creds) {
    creds = grpcClientCredentials(identity, { checkServerIdentity: expectPeer({ trustDomain: identity.id.trustDomain, namespace: t.namespace, appId: t.appId }) });
    byApp.set(key, creds);
  }
  // the TLS server name is not an address (RFC 6066) and is not what is checked: the SPIFFE ID is.
  // Connections of its own: a channel made after a renewal must not share the old one's connection
  return new Ctor(address, creds, { ...PEER_CHANNEL_OPTIONS, 'grpc.ssl_target_name_override': 'rt-internal', 'grpc.use_local_subchannel_pool': 1 });
}

/** gRPC channels, one per address (and with mTLS per app meant), kept for the sidecar's life. */
export class Channels {
  private readonly clients = new Map<string, grpc.Client>();
  private readonly identity?: IdentityManager;

  /** `identity`: channels to other sidecars are mutual TLS (not those to this sidecar's own app). */
  private stopRotation?: () => void;

  constructor(identity?: IdentityManager) {
    this.identity = identity;
    // after a renewal, channels to other sidecars are replaced: calls under way finish on the old
    // ones (grpc-js closes a channel once its calls have ended), new calls connect with the new certificate
    this.stopRotation = identity?.onRotate(() => {
      for (const [key, c] of this.clients) {
        if (!key.includes('#')) continue;
        this.clients.delete(key);
        c.close();
      }
    });
  }

  /** A channel to another sidecar serving `t`, or with no target to this sidecar's own app (plaintext). */
  get(address: string, t?: AppTarget): grpc.Client {
    const key = t && this.identity ? `${address}#${t.namespace}/${t.appId}` : address;
    let c = this.clients.get(key);
    if (!c) {
      c = t ? peerChannel(grpc.Client, address, t, this.identity) : new grpc.Client(address, grpc.credentials.createInsecure(), PEER_CHANNEL_OPTIONS);
      this.clients.set(key, c);
    }
    return c;
  }

  drop(address: string): void {
    for (const [key, c] of this.clients) {
      if (key !== address && !key.startsWith(`${address}#`)) continue;
      c.close();
      this.clients.delete(key);
    }
  }

  close(): void {
    this.stopRotation?.();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

function fail(call: Call, code: grpc.status, details: string): void {
  call.emit('error', { code, details });
}

/** Copies the messages both ways with backpressure, and ends `call` with `out`'s status and trailers. */
function relay(call: Call, out: Out, onStatus?: (s: grpc.StatusObject) => void): void {
  call.on('data', (m: Buffer) => {
    if (!out.write(m)) {
      call.pause();
      out.once('drain', () => call.resume());
    }
  });
  call.on('end', () => out.end());
  call.on('cancelled', () => out.cancel());
  out.on('metadata', (md: grpc.Metadata) => call.sendMetadata(md));
  out.on('data', (m: Buffer) => {
    if (!call.write(m)) {
      out.pause();
      call.once('drain', () => out.resume());
    }
  });
  out.on('error', () => undefined); // the status below carries it
  out.on('status', (s: grpc.StatusObject) => {
    onStatus?.(s);
    if (s.code === grpc.status.OK) call.end(s.metadata);
    else call.emit('error', { code: s.code, details: s.details, metadata: s.metadata });
  });
}

function deadlineOf(call: Call): grpc.CallOptions {
  const d = call.getDeadline();
  return d instanceof Date || (typeof d === 'number' && Number.isFinite(d)) ? { deadline: d } : {};
}

/** The calling sidecar's side, on its public gRPC port: unknown methods with rt-app-id go out. */
export function callerProxy(server: GrpcServer, resolver: Resolver, caller: Caller, channels: Channels, tracing?: TracingService): grpc.handleBidiStreamingCall<Buffer, Buffer> {
  return (call) => {
    const md = call.metadata;
    const id = String(md.get('rt-app-id')[0] ?? md.get('dapr-app-id')[0] ?? '');
    const path = call.getPath();
    if (!id) return fail(call, grpc.status.UNIMPLEMENTED, `unknown method ${path}: to call another app's gRPC service through rt, send its app id in the rt-app-id (or dapr-app-id) metadata`);
    if (!server.authorized(md)) return call.emit('error', GrpcServer.unauthenticated());
    const target = parseAppTarget(id, caller.namespace);
    if (!target) return fail(call, grpc.status.INVALID_ARGUMENT, `"${id}" in rt-app-id is not an app id (optionally .<namespace>)`);
    resolver.resolve(target).then(
      (address) => {
        const out = md.clone();
        // the hop's own metadata comes from this sidecar only, never from the app
        for (const k of [...DROP, ...Object.keys(out.getMap()).filter(isHopHeader)]) out.remove(k);
        out.set(TARGET, target.appId);
        out.set(CALLER_APP, caller.app_id);
        out.set(CALLER_NS, caller.namespace);
        if (caller.trust_domain) out.set(CALLER_TD, caller.trust_domain);
        // tracing on: a CLIENT span per proxied call, whose context the target's sidecar gets
        const span = tracing ? proxiedCallSpan(tracing, 'client', path, out, { 'rt.target_app_id': target.appId }) : undefined;
        const stream = channels.get(address, target).makeBidiStreamRequest(path, raw, raw, out, deadlineOf(call));
        relay(call, stream, (s) => {
          // the target's sidecar (not its app) did not answer: look it up again next time
          if (s.code === grpc.status.UNAVAILABLE && !s.metadata.get(APP_DOWN).length) {
            resolver.failed(target);
            channels.drop(address);
            s.details = `failed to invoke, id: ${target.appId}, err: the sidecar of "${target.appId}" at ${address} did not answer: ${s.details}`;
          }
          if (span) endProxiedCall(span, s);
        });
      },
      (e: unknown) => fail(call, grpc.status.UNAVAILABLE, e instanceof ResolveError ? `failed to invoke, id: ${target.appId}, err: ${e.message}` : String(e)),
    );
  };
}

export interface CalleeOptions {
  appId: string;
  /** host:port of this sidecar's gRPC app; undefined when the app does not speak gRPC. */
  appAddress?: string;
  appApiToken?: string;
  /** Holds one --app-max-concurrency slot until the call ends. */
  slot(): Promise<() => void>;
  /**
   * The receiving side's checks (the caller against the peer's certificate, target app id,
   * accessControl, an app at all): a reason, or undefined. May fill `head.caller` from the certificate.
   */
  refuse(head: RequestHead, call: PeerCall): { status: number; message: string } | undefined;
  /** A SERVER span per proxied call, when tracing is on. */
  tracing?: TracingService;
}

/** The receiving sidecar's side, on the internal port's gRPC: a proxied call goes to its gRPC app. */
export function calleeProxy(o: CalleeOptions, channels: Channels): grpc.handleBidiStreamingCall<Buffer, Buffer> {
  return (call) => {
    const md = call.metadata;
    const target = String(md.get(TARGET)[0] ?? '');
    const path = call.getPath();
    if (!target) return fail(call, grpc.status.UNIMPLEMENTED, `unknown method ${path}`);
    const str = (k: string) => String(md.get(k)[0] ?? '');
    const head: RequestHead = { method: 'POST', path, query: '', headers: [], caller: { app_id: str(CALLER_APP), namespace: str(CALLER_NS), trust_domain: str(CALLER_TD) }, target_app_id: target, has_body: true };
    const refused = o.refuse(head, call);
    if (refused) return fail(call, refused.status === 403 ? grpc.status.PERMISSION_DENIED : grpc.status.UNAVAILABLE, refused.message);
    if (!o.appAddress) return fail(call, grpc.status.UNIMPLEMENTED, `app "${o.appId}" does not speak gRPC: its sidecar runs with --app-protocol http, so gRPC calls cannot be proxied to it`);
    const out = md.clone();
    for (const k of [TARGET, CALLER_APP, CALLER_NS, CALLER_TD]) out.remove(k);
    out.set('dapr-caller-app-id', head.caller.app_id);
    out.set('dapr-callee-app-id', o.appId);
    if (o.appApiToken) {
      out.set('rt-api-token', o.appApiToken);
      out.set('dapr-api-token', o.appApiToken);
    }
    const address = o.appAddress;
    // tracing on: a SERVER span under the caller sidecar's CLIENT span; the app gets its context
    const span = o.tracing ? proxiedCallSpan(o.tracing, 'server', path, out, { 'rt.caller_app_id': head.caller.app_id, 'rt.target_app_id': o.appId }) : undefined;
    void o.slot().then((free) => {
      // the caller may have gone while the call waited for a slot
      if (call.cancelled) {
        span?.end('cancelled by the caller');
        return free();
      }
      relay(call, channels.get(address).makeBidiStreamRequest(path, raw, raw, out, deadlineOf(call)), (s) => {
        free();
        if (span) endProxiedCall(span, s);
        // the app itself is down: say so, and mark it so the caller does not blame the sidecar
        if (s.code === grpc.status.UNAVAILABLE && !s.metadata.get(APP_DOWN).length) {
          s.details = `failed to invoke, id: ${o.appId}, err: app "${o.appId}" at ${address} did not answer: ${s.details}`;
          s.metadata.set(APP_DOWN, o.appId);
        }
      });
    });
  };
}
