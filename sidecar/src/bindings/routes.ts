/**
 * POST /v1.0/bindings/<name>: invokes an output binding.
 * Body: {operation (required), data (optional, any JSON), metadata (optional, strings)}.
 *
 * The body is read as JSON whatever its Content-Type (clients of the ecosystem's API send
 * none, or text/plain, too). Bindings that stream an operation's `data` (bindings.sftp create)
 * get it as it arrives (stream-body.ts) when the body names `operation` before a string `data`;
 * every other body is read whole with the low-copy reader of body.ts, because `data` may be a file.
 * Streamed responses (Readable) are piped; a client that goes away destroys the stream, which
 * lets the binding release what it holds (e.g. a remote file handle). The lookup, checks and
 * errors are the bindings service's (service.ts, shared with the gRPC API).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { SidecarContext } from '../context.ts';
import type { BindingResponse, OutputBinding } from '../components/types.ts';
import type { CarriedContext } from '../tracing/carried.ts';
import { checkBody } from '../http/schema.ts';
import { parseJsonBody } from './body.ts';
import { INVOKE } from './schemas.ts';
import { bindingMetadata, BindingsService } from './service.ts';
import { BodySource, readHead } from './stream-body.ts';

/** Bindings carry whole files as base64 in JSON: allow large bodies on this route only. */
export const BINDING_BODY_LIMIT = 512 * 1024 * 1024;

export async function outputBindingRoutes(ctx: SidecarContext, bindings: BindingsService): Promise<void> {
  await ctx.http.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // the route reads the body itself: it knows the binding, and so whether to stream
    scope.addContentTypeParser('*', (_req: unknown, payload: Readable, done: (err: null, body: Readable) => void) => done(null, payload));
    scope.post<{ Params: { name: string } }>('/v1.0/bindings/:name', { schema: INVOKE }, async (req, reply) => {
      const name = req.params.name;
      const binding = bindings.binding(name);
      const payload = req.body instanceof Readable ? req.body : undefined;
      let whole: Buffer = Buffer.alloc(0);
      if (payload) {
        const src = new BodySource(payload, req.headers as IncomingHttpHeaders, BINDING_BODY_LIMIT);
        try {
          const got = binding.invokeStreamed ? await streamedOrWhole(bindings, name, binding, src, req.headers) : await src.rest([]);
          if (!Buffer.isBuffer(got)) return send(reply, got);
          whole = got;
        } catch (e) {
          await src.discard(); // what the client still sends is not wanted
          throw e;
        }
      }
      const body = whole.length === 0 ? null : parseJsonBody(whole);
      checkBody(INVOKE['x-body']!, body);
      const b = body as { operation: string; data?: unknown; metadata?: Record<string, string> | null };
      return send(reply, await bindings.invoke(name, { operation: b.operation, data: b.data, metadata: b.metadata, trace: req.headers }));
    });
  });
}

/**
 * Streams `data` to the binding when the body names a streamed operation before a string
 * `data`; otherwise returns the whole body, to be parsed as any other.
 */
async function streamedOrWhole(bindings: BindingsService, name: string, binding: OutputBinding, src: BodySource, trace: CarriedContext): Promise<BindingResponse | Buffer> {
  const head = await readHead(src);
  if (head.kind === 'whole') return head.body;
  // the operation must come before the data (the usual order) to know that it streams
  const operation = typeof head.members.operation === 'string' ? bindings.operation(name, binding, head.members.operation) : '';
  if (!binding.invokeStreamed || !binding.streamedOperations?.().includes(operation)) return src.rest([head.raw]);
  const early = head.members.metadata === undefined ? undefined : bindingMetadata(head.members.metadata);
  const reader = head.reader;
  const complete = async () => bindingMetadata(mergedMetadata(head.members, await reader.rest()));
  return bindings.invokeStreamed(name, binding as OutputBinding & Required<Pick<OutputBinding, 'invokeStreamed'>>, { operation, data: reader.chunks(), early, complete }, trace);
}

/** The body's metadata: a later member wins over an earlier one, as in JSON.parse. */
function mergedMetadata(head: Record<string, unknown>, tail: Record<string, unknown>): unknown {
  return Object.hasOwn(tail, 'metadata') ? tail.metadata : head.metadata;
}

function send(reply: FastifyReply, res: BindingResponse): FastifyReply {
  for (const [k, v] of Object.entries(res.metadata ?? {})) {
    // response metadata travels as headers, as the ecosystem's HTTP API does
    if (/^[A-Za-z0-9-]+$/.test(k)) reply.header(`metadata.${k}`, v);
  }
  if (res.data === undefined) return reply.status(204).send();
  if (res.contentType) reply.type(res.contentType);
  if (res.data instanceof Readable) return reply.status(200).send(res.data);
  return reply.status(200).send(Buffer.from(res.data.buffer, res.data.byteOffset, res.data.byteLength));
}
