/**
 * InvokeBinding and the secret methods, on the blocks' services that the HTTP API uses too
 * (bindings/service.ts, secrets/service.ts): they find the component, check the request and
 * answer with the error table's rows; here the messages are only decoded and encoded.
 *
 * `data` bytes reach the binding as UTF-8 text when they are valid UTF-8 (the HTTP API's string
 * `data`, e.g. SFTP's base64 file content, arrives the same way), else as raw bytes.
 */
import { Readable } from 'node:stream';
import { ERRORS, fail } from '../../api/errors.ts';
import type { BindingsService } from '../../bindings/service.ts';
import { notFound } from '../../http/errors.ts';
import type { SecretsService } from '../../secrets/service.ts';
import { bytesOf, metadataOf } from './handler.ts';
import { metadataContext } from '../../tracing/carried.ts';

/** Largest binding response we buffer into one gRPC message (the server's send limit). */
export const MAX_BINDING_RESPONSE_BYTES = 64 * 1024 * 1024 - 1024;

export interface InvokeBindingRequest {
  name: string;
  data: Buffer;
  metadata: Record<string, string>;
  operation: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function dataOf(b: Buffer): unknown {
  if (b.length === 0) return undefined;
  try {
    return utf8.decode(b);
  } catch {
    return b;
  }
}

async function collect(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    size += buf.length;
    if (size > limit) {
      stream.destroy();
      throw fail(ERRORS.BINDING_RESPONSE_TOO_LARGE, `the binding's response is larger than ${limit} bytes, the gRPC message limit; use the HTTP API, which streams it`);
    }
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

export function bindingMethods(bindings: BindingsService) {
  return {
    async InvokeBinding(req: InvokeBindingRequest, call?: { metadata: { get(key: string): unknown[] } }): Promise<{ data: Buffer; metadata: Record<string, string> }> {
      // the call's trace context (the tracing interceptor's span), for the binding call's span
      const trace = call && metadataContext(call.metadata);
      const res = await bindings.invoke(req.name ?? '', { operation: req.operation, data: dataOf(bytesOf(req.data)), metadata: metadataOf(req.metadata), trace });
      let data: Buffer = Buffer.alloc(0);
      if (res.data instanceof Readable) data = await collect(res.data, MAX_BINDING_RESPONSE_BYTES);
      else if (res.data) data = bytesOf(res.data);
      return { data, metadata: { ...(res.metadata ?? {}) } };
    },
  };
}

export interface GetSecretRequest {
  store_name: string;
  key: string;
  metadata: Record<string, string>;
}

export function secretMethods(secrets: SecretsService) {
  return {
    async GetSecret(req: GetSecretRequest): Promise<{ data: Record<string, string> }> {
      const secret = await secrets.get(req.store_name, req.key, metadataOf(req.metadata));
      if (!secret) throw notFound('ERR_SECRET_GET', `secret "${req.key.slice(0, 80)}" is not found in secret store ${req.store_name}`);
      return { data: secret };
    },

    async GetBulkSecret(req: Omit<GetSecretRequest, 'key'>): Promise<{ data: Record<string, { secrets: Record<string, string> }> }> {
      const all = await secrets.bulk(req.store_name, metadataOf(req.metadata));
      const data: Record<string, { secrets: Record<string, string> }> = {};
      for (const [name, values] of Object.entries(all)) data[name] = { secrets: { ...values } };
      return { data };
    },
  };
}
