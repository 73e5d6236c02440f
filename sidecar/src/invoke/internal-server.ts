/**
 * The receiving side of service invocation: the internal gRPC port (50002 on a cluster, a free
 * one standalone). A call is checked against the Configuration's accessControl, then handed to
 * this sidecar's app through the app channel, which adds the app's API token and holds
 * --app-max-concurrency.
 */
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { AppChannel } from '../app/channel.ts';
import { GrpcServer } from '../grpc/server.ts';
import { headerObject, responseHeaders } from './headers.ts';
import { internalService, type InvokeChunk, type RequestHead, type ResponseHead } from './proto.ts';
import { splitHead, writeBody } from './stream.ts';

/** Decides whether a caller may make a call; a string is the reason it may not. */
export type AccessCheck = (head: RequestHead) => string | undefined;

export interface InternalServerOptions {
  appId: string;
  namespace: string;
  app: AppChannel;
  log: Logger;
  access: AccessCheck;
}

export class InternalServer {
  // the same server class as the public gRPC port, without its API token: callers are sidecars
  private readonly server: GrpcServer;
  private readonly o: InternalServerOptions;

  constructor(o: InternalServerOptions) {
    this.o = o;
    this.server = new GrpcServer(o.log);
    this.server.addService(internalService(), { CallStream: (call: grpc.ServerDuplexStream<InvokeChunk, InvokeChunk>) => void this.serve(call) });
  }

  listen(address: string, port: number): Promise<number> {
    return this.server.listen(address, port);
  }

  close(): Promise<void> {
    return this.server.close();
  }

  private async serve(call: grpc.ServerDuplexStream<InvokeChunk, InvokeChunk>): Promise<void> {
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
      if (head.target_app_id !== this.o.appId) {
        answer({ error_code: 'ERR_DIRECT_INVOKE', message: `this sidecar serves app id "${this.o.appId}", not "${head.target_app_id}" (a stale registry entry or DNS record?)` });
        call.end();
        return;
      }
      const denied = this.o.access(head);
      if (denied) {
        answer({ status: 403, error_code: 'ERR_DIRECT_INVOKE', message: denied });
        call.end();
        return;
      }
      if (!this.o.app.enabled) {
        answer({ error_code: 'ERR_DIRECT_INVOKE', message: `app "${this.o.appId}" has no app port: its sidecar was started without --app-port` });
        call.end();
        return;
      }
      const headers = headerObject(head.headers);
      headers['rt-caller-app-id'] = headers['dapr-caller-app-id'] = head.caller?.app_id ?? '';
      headers['rt-callee-app-id'] = headers['dapr-callee-app-id'] = this.o.appId;
      const res = await this.o.app.invokeStream({
        method: head.method,
        path: head.path + head.query,
        headers,
        body: head.has_body ? split.body : undefined,
        signal: abort.signal,
      });
      answer({ status: res.status, headers: responseHeaders(res.headers) });
      await writeBody(res.body, call as unknown as Duplex);
      finished = true;
      call.end();
    } catch (e) {
      const message = `app "${this.o.appId}" did not answer: ${(e as Error).message}`;
      if (abort.signal.aborted) return; // the caller went away: nobody to tell
      this.o.log.debug({ err: (e as Error).message }, 'invocation failed');
      if (!headSent) {
        answer({ error_code: 'ERR_DIRECT_INVOKE', message });
        call.end();
      } else {
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: message });
      }
    }
  }
}
