/**
 * InvokeBinding and the secret methods. Checks and error codes follow the HTTP routes
 * (bindings/routes.ts): unknown binding or store → 400 (INVALID_ARGUMENT) listing the loaded
 * ones, unknown operation → 400 listing the binding's operations, component failure → 500.
 *
 * `data` bytes reach the binding as UTF-8 text when they are valid UTF-8 (the HTTP API's string
 * `data`, e.g. SFTP's base64 file content, arrives the same way), else as raw bytes.
 */
import { Readable } from 'node:stream';
import type { ComponentRegistry } from '../../components/registry.ts';
import { ApiError, badRequest, errorMessage, malformed, notFound } from '../../http/errors.ts';
import type { SecretsService } from '../../secrets/service.ts';
import { bytesOf, metadataOf } from './handler.ts';

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
      throw new ApiError(413, 'ERR_INVOKE_OUTPUT_BINDING', `the binding's response is larger than ${limit} bytes, the gRPC message limit; use the HTTP API, which streams it`);
    }
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

export function bindingMethods(components: ComponentRegistry) {
  return {
    async InvokeBinding(req: InvokeBindingRequest): Promise<{ data: Buffer; metadata: Record<string, string> }> {
      const name = req.name;
      if (!name) throw malformed('"name" is required: the binding component to invoke');
      const binding = components.outputBinding(name);
      if (!binding) {
        const loaded = components.namesOf('bindings');
        throw badRequest('ERR_BINDING_NOT_FOUND', `output binding "${name.slice(0, 80)}" is not loaded; loaded bindings: ${loaded.join(', ') || 'none'}`);
      }
      if (!req.operation) throw malformed('"operation" is required');
      const operations = binding.operations();
      if (!operations.includes(req.operation)) {
        throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${name}" does not support operation "${req.operation.slice(0, 80)}"; supported: ${operations.join(', ')}`);
      }
      let res;
      try {
        res = await binding.invoke({ operation: req.operation, data: dataOf(bytesOf(req.data)), metadata: metadataOf(req.metadata) ?? {} });
      } catch (e) {
        if (e instanceof ApiError) throw e;
        throw new ApiError(500, 'ERR_INVOKE_OUTPUT_BINDING', `error invoking output binding "${name}": ${errorMessage(e)}`);
      }
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
