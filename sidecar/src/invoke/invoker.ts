/**
 * The calling side of service invocation: resolve the app id, call its sidecar's internal port,
 * send the head and the body as it arrives, and hand back the answer's head with its body still
 * streaming. Used by the HTTP routes and the gRPC InvokeService. Two transports, both served on
 * the internal port: HTTP/1.1 keep-alive (the default, internal-http.ts) and one bidi gRPC stream
 * per call (`RT_INVOKE_TRANSPORT=grpc`), which costs several times more per call.
 */
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { ApiError } from '../http/errors.ts';
import type { IdentityManager } from '../identity/manager.ts';
import { directInvokeError, type InvokeAnswer, type InvokeCall } from './call.ts';
import { HttpTransport } from './internal-http.ts';
import { peerChannel } from './grpc-proxy.ts';
import { internalClient, type Caller, type InvokeChunk, type RequestHead } from './proto.ts';
import { ResolveError, type Resolver } from './resolve.ts';
import { splitHead, writeBody } from './stream.ts';
import type { AppTarget } from './target.ts';

/** A TLS handshake that failed on the peer's certificate or ours: not a sidecar that is down. */
function isTlsRefusal(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  const msg = (e as Error).message ?? '';
  return code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || /certificate|the peer is spiffe|SPIFFE ID/.test(msg);
}

export class Invoker {
  private readonly clients = new Map<string, grpc.Client>();
  private readonly resolver: Resolver;
  private readonly caller: Caller;
  private readonly http?: HttpTransport;
  private readonly identity?: IdentityManager;
  private readonly stopRotation?: () => void;

  /** `identity`: mutual TLS toward the other sidecars, each checked to be the app meant. */
  constructor(resolver: Resolver, caller: Caller, transport: 'http1' | 'grpc' = 'http1', identity?: IdentityManager) {
    this.resolver = resolver;
    this.caller = caller;
    this.identity = identity;
    if (transport === 'http1') this.http = new HttpTransport(identity);
    // after a renewal new streams go over new connections with the new certificate; calls under way finish
    this.stopRotation = identity?.onRotate(() => {
      const retired = [...this.clients.values()];
      this.clients.clear();
      for (const c of retired) c.close();
    });
  }

  async invoke(t: AppTarget, c: InvokeCall): Promise<InvokeAnswer> {
    let address: string;
    try {
      address = await this.resolver.resolve(t);
    } catch (e) {
      if (e instanceof ResolveError) throw directInvokeError(t.appId, e.message);
      throw e;
    }
    if (this.http) {
      try {
        return await this.http.call(t, address, this.caller, c);
      } catch (e) {
        if (e instanceof ApiError) throw e;
        if (isTlsRefusal(e)) {
          // an address now held by another app's sidecar (a pod IP reused): look it up again next time
          this.resolver.failed(t);
          this.http.drop(address);
          throw directInvokeError(t.appId, `the sidecar at ${address} is not "${t.appId}" in namespace "${t.namespace}" or refused this sidecar's certificate: ${(e as Error).message}`);
        }
        if (['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'EHOSTUNREACH', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'].includes((e as NodeJS.ErrnoException).code ?? '')) {
          this.resolver.failed(t);
          this.http.drop(address);
        }
        throw directInvokeError(t.appId, `the sidecar of "${t.appId}" at ${address} did not answer: ${(e as Error).message}`);
      }
    }
    return this.overStream(t, address, c);
  }

  private async overStream(t: AppTarget, address: string, c: InvokeCall): Promise<InvokeAnswer> {
    const head: RequestHead = { method: c.method, path: c.path, query: c.query, headers: c.headers, caller: this.caller, target_app_id: t.appId, has_body: c.body !== undefined };
    const call = (this.client(t, address) as unknown as { CallStream(md: grpc.Metadata, o: grpc.CallOptions): grpc.ClientDuplexStream<InvokeChunk, InvokeChunk> }).CallStream(new grpc.Metadata(), {});
    const cancel = () => call.cancel();
    c.signal?.addEventListener('abort', cancel, { once: true });
    if (!c.body) {
      call.end({ request: head }); // head and half-close in one go
    } else {
      call.write({ request: head });
      // the body goes out while the answer is awaited: the app may answer before reading it all
      writeBody(c.body, call as unknown as Duplex).then(
        () => call.end(),
        () => call.cancel(), // the caller's body broke off: the target sees the call cancelled
      );
    }
    let split: Awaited<ReturnType<typeof splitHead>>;
    try {
      split = await splitHead(call as unknown as Duplex);
    } catch (e) {
      const err = e as grpc.ServiceError;
      if (err.code === grpc.status.UNAVAILABLE) {
        this.resolver.failed(t);
        this.drop(address);
      }
      throw directInvokeError(t.appId, `the sidecar of "${t.appId}" at ${address} did not answer: ${err.details || err.message}`);
    }
    const res = split.head?.response;
    if (!res) {
      call.cancel();
      throw directInvokeError(t.appId, `the sidecar of "${t.appId}" at ${address} ended the call without an answer`);
    }
    if (res.error_code) {
      call.cancel();
      throw new ApiError(res.status || 500, res.error_code, res.error_code === 'ERR_DIRECT_INVOKE' ? `failed to invoke, id: ${t.appId}, err: ${res.message}` : res.message);
    }
    const body = split.body;
    body.on('close', () => c.signal?.removeEventListener('abort', cancel));
    const g = res.grpc_status;
    return { status: res.status, headers: res.headers, body, grpcStatus: g ? { code: g.code, message: g.message, details: g.details?.length ? Buffer.from(g.details) : undefined } : undefined };
  }

  private client(t: AppTarget, address: string): grpc.Client {
    const key = this.identity ? `${address}#${t.namespace}/${t.appId}` : address;
    let c = this.clients.get(key);
    if (!c) {
      c = peerChannel(internalClient(), address, t, this.identity);
      this.clients.set(key, c);
    }
    return c;
  }

  private drop(address: string): void {
    for (const [key, c] of this.clients) {
      if (key !== address && !key.startsWith(`${address}#`)) continue;
      c.close();
      this.clients.delete(key);
    }
  }

  async close(): Promise<void> {
    this.stopRotation?.();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    await this.http?.close();
  }
}
