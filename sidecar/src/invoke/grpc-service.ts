/**
 * gRPC `InvokeService` on the sidecar's gRPC port (50001): the same call as
 * `/v1.0/invoke/<id>/method/<method>`, with the verb and query from `http_extension`. The answer
 * is one message, so its body is collected (up to the gRPC send limit). As the reference runtime
 * answers: an app that speaks gRPC fails with its own status, unchanged (code, message, details);
 * an HTTP app's non-2xx answer is a gRPC error whose code follows the HTTP status
 * (`codeOfHttpStatus`), whose message holds the body, with an ErrorInfo (domain `dapr.io`,
 * metadata `http.code` and the body's start in `http.error_message`); an HTTP app's status also
 * comes as the response header `dapr-http-status`.
 */
import { STATUS_CODES } from 'node:http';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { protoLoader } from '../../../shared/proto-libs.ts';
import { GrpcServer } from '../grpc/server.ts';
import { toStatus } from '../grpc/runtime/errors.ts';
import { statusDetails } from '../pluggable/errors.ts';
import { codeOfHttpStatus } from './grpc-status.ts';
import { DATA_TYPE_URL, HOP_BY_HOP } from './headers.ts';
import type { Header } from './proto.ts';
import type { Dispatch } from './routes.ts';

const VERBS = ['', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'];
/** Most answer bytes put in one message (the server's send limit is 64 MiB). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024 - 1024;
/** gRPC metadata that is transport, not a header for the target app. */
const NOT_HEADERS = /^(grpc-|:|content-type$|user-agent$|te$|rt-api-token$|dapr-api-token$|host$)/;
/** An HTTP app's answer header that becomes gRPC metadata: not hop-by-hop, framing or gRPC's own. */
const ANSWER_HEADER_AS_METADATA = (name: string): boolean =>
  !HOP_BY_HOP.has(name) && name !== DATA_TYPE_URL && !/^(grpc-|:|content-length$|content-type$|dapr-http-status$|rt-invoke-)/.test(name) && /^[0-9a-z._-]+$/.test(name);
/** The ErrorInfo metadata value holding the start of an HTTP app's error body is this long at most (as the reference runtime cuts it). */
const ERROR_INFO_VALUE_MAX = 63;

interface InvokeServiceRequest {
  id: string;
  message: { method: string; data: { type_url: string; value: Buffer } | null; content_type: string; http_extension: { verb: number; querystring: string } | null } | null;
}

export function invokeServiceDefinition(): grpc.ServiceDefinition {
  const pkg = protoLoader().loadSync(join(import.meta.dirname, 'proto', 'invoke-service.proto'), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true, includeDirs: [join(import.meta.dirname, '..', 'app', 'proto')] });
  return pkg['dapr.proto.runtime.v1.Dapr'] as grpc.ServiceDefinition;
}

export function invokeServiceHandler(server: GrpcServer, dispatch: Dispatch): grpc.handleUnaryCall<InvokeServiceRequest, unknown> {
  return (call, callback) => {
    if (!server.authorized(call.metadata)) return callback(GrpcServer.unauthenticated());
    const { id, message } = call.request;
    if (!id) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'InvokeService needs the target app id in "id"' });
    if (!message?.method) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'InvokeService needs message.method, the method (path) to call on the target' });
    const method = VERBS[message.http_extension?.verb ?? 0] || 'POST';
    const data = message.data?.value ?? Buffer.alloc(0);
    const headers: Header[] = [];
    for (const [name, v] of Object.entries(call.metadata.getMap())) if (!NOT_HEADERS.test(name)) headers.push({ name, value: String(v) });
    if (message.data?.type_url) headers.push({ name: DATA_TYPE_URL, value: message.data.type_url });
    if (data.length > 0) {
      headers.push({ name: 'content-type', value: message.content_type || 'application/json' });
      headers.push({ name: 'content-length', value: String(data.length) });
    }
    const path = `/${message.method.replace(/^\/+/, '')}`;
    void (async () => {
      const res = await dispatch(id, { method, path, query: message.http_extension?.querystring ? `?${message.http_extension.querystring.replace(/^\?/, '')}` : '', headers, body: data.length > 0 ? Readable.from([data]) : undefined });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of res.body) {
        size += (c as Buffer).length;
        if (size > MAX_ANSWER_BYTES) {
          res.body.destroy();
          return callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: `the answer of ${id} is larger than ${MAX_ANSWER_BYTES} bytes, too large for one gRPC message: call it over HTTP, which streams` });
        }
        chunks.push(c as Buffer);
      }
      const body = Buffer.concat(chunks);
      const contentType = res.headers.find((h) => h.name === 'content-type')?.value ?? '';
      const app = res.grpcStatus;
      if (app) {
        // an app that speaks gRPC: its own status, as it sent it
        if (app.code !== grpc.status.OK) {
          const metadata = new grpc.Metadata();
          if (app.details) metadata.set('grpc-status-details-bin', app.details);
          return callback({ code: app.code, details: app.message.toWellFormed(), metadata });
        }
      } else {
        // the app's answer headers go back as the call's metadata, as the reference runtime
        const head = new grpc.Metadata();
        for (const h of res.headers) {
          if (!ANSWER_HEADER_AS_METADATA(h.name)) continue;
          try {
            head.add(h.name, h.value);
          } catch {
            // a value gRPC metadata cannot carry (not printable ASCII) is left out
          }
        }
        head.set('dapr-http-status', String(res.status));
        call.sendMetadata(head);
        const code = codeOfHttpStatus(res.status);
        if (code !== grpc.status.OK) {
          const text = body.toString('utf8');
          const message = `${id} answered HTTP ${res.status}: ${text.slice(0, 4096)}`.toWellFormed();
          const info = { reason: STATUS_CODES[res.status] ?? '', domain: 'dapr.io', metadata: { 'http.code': String(res.status), 'http.error_message': text.slice(0, ERROR_INFO_VALUE_MAX).toWellFormed() } };
          return callback({ code, details: message, metadata: statusDetails(code, message, info) });
        }
      }
      callback(null, { data: { type_url: res.headers.find((h) => h.name === DATA_TYPE_URL)?.value ?? '', value: body }, content_type: contentType });
    })().catch((e: unknown) => callback(toStatus(e)));
  };
}
