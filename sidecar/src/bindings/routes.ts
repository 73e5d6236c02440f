/**
 * POST /v1.0/bindings/<name>: invokes an output binding.
 * Body: {operation (required), data (optional, any JSON), metadata (optional, strings)}.
 *
 * The body is read as JSON whatever its Content-Type (clients of the ecosystem's API send
 * none, or text/plain, too), with the low-copy reader of body.ts because `data` may be a file.
 * Streamed responses (Readable) are piped; a client that goes away destroys the stream, which
 * lets the binding release what it holds (e.g. a remote file handle).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { SidecarContext } from '../context.ts';
import { ApiError, badRequest, errorMessage, malformed } from '../http/errors.ts';
import { parseJsonBody, readBody } from './body.ts';

/** Bindings carry whole files as base64 in JSON: allow large bodies on this route only. */
export const BINDING_BODY_LIMIT = 512 * 1024 * 1024;

export async function setup(ctx: SidecarContext): Promise<void> {
  await ctx.http.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', async (req: { headers: IncomingHttpHeaders }, payload: Readable) => {
      const buf = await readBody(payload, req.headers, BINDING_BODY_LIMIT);
      return buf.length === 0 ? undefined : parseJsonBody(buf);
    });
    scope.post<{ Params: { name: string } }>('/v1.0/bindings/:name', async (req, reply) => {
      const name = req.params.name;
      const binding = ctx.components.outputBinding(name);
      if (!binding) {
        const loaded = ctx.components.namesOf('bindings');
        throw badRequest('ERR_BINDING_NOT_FOUND', `output binding "${name}" is not loaded; loaded bindings: ${loaded.join(', ') || 'none'}`);
      }
      const body = req.body;
      if (typeof body !== 'object' || body === null || Array.isArray(body) || Buffer.isBuffer(body)) {
        throw malformed('the body must be a JSON object with "operation", and optionally "data" and "metadata"');
      }
      const b = body as Record<string, unknown>;
      if (typeof b.operation !== 'string' || b.operation === '') throw malformed('"operation" is required and must be a string');
      const operations = binding.operations();
      if (!operations.includes(b.operation)) {
        throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${name}" does not support operation "${b.operation}"; supported: ${operations.join(', ')}`);
      }
      const metadata: Record<string, string> = {};
      if (b.metadata !== undefined && b.metadata !== null) {
        if (typeof b.metadata !== 'object' || Array.isArray(b.metadata)) throw malformed('"metadata" must be an object of strings');
        for (const [k, v] of Object.entries(b.metadata as Record<string, unknown>)) {
          if (typeof v !== 'string') throw malformed(`"metadata.${k}" must be a string`);
          // an own "__proto__" key stays a plain entry
          Object.defineProperty(metadata, k, { value: v, enumerable: true, writable: true, configurable: true });
        }
      }
      let res;
      try {
        res = await binding.invoke({ operation: b.operation, data: b.data, metadata });
      } catch (e) {
        if (e instanceof ApiError) throw e;
        throw new ApiError(500, 'ERR_INVOKE_OUTPUT_BINDING', `error invoking output binding "${name}": ${errorMessage(e)}`);
      }
      for (const [k, v] of Object.entries(res.metadata ?? {})) {
        // response metadata travels as headers, as the ecosystem's HTTP API does
        if (/^[A-Za-z0-9-]+$/.test(k)) reply.header(`metadata.${k}`, v);
      }
      if (res.data === undefined) return reply.status(204).send();
      if (res.contentType) reply.type(res.contentType);
      if (res.data instanceof Readable) return reply.status(200).send(res.data);
      return reply.status(200).send(Buffer.from(res.data.buffer, res.data.byteOffset, res.data.byteLength));
    });
  });
}
