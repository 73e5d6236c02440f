/**
 * The cryptography HTTP API, as the reference runtime serves it:
 *   PUT /v1.0-alpha1/crypto/<component>/encrypt   body: plaintext  → 200 ciphertext
 *   PUT /v1.0-alpha1/crypto/<component>/decrypt   body: ciphertext → 200 plaintext
 * with the options in the reference's headers (schemas.ts). Both ways the body is read and the
 * answer sent as they flow, never whole in memory (the reference buffers the answer). The status
 * is sent with the first piece of output: for decrypt, once the header and the first segment
 * have verified, so a wrong key, an altered header or a first segment that fails is a JSON
 * error. A failure further on can no longer change the status: the response is cut off (the
 * client sees an incomplete body, never unverified plaintext).
 */
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SidecarContext } from '../context.ts';
import * as schemas from './schemas.ts';
import type { CryptoService } from './service.ts';

type Route = { Params: { name: string } };

/** dapr/kit's IsTruthy: the values the reference reads as true in a header. */
const TRUTHY = new Set(['y', 'yes', 'true', 't', 'on', '1']);

function header(req: FastifyRequest, name: string): string {
  const v = req.headers[name];
  return (Array.isArray(v) ? v[0] : v) ?? '';
}

/** The body's chunks; stopping early leaves the request to be drained, not destroyed (the answer still goes out on its socket). */
function bodyOf(req: FastifyRequest): AsyncIterable<Uint8Array> {
  const body = req.body instanceof Readable ? req.body : undefined;
  if (!body) return (async function* () {})();
  return { [Symbol.asyncIterator]: () => body.iterator({ destroyOnReturn: false }) };
}

async function send(req: FastifyRequest, reply: FastifyReply, out: AsyncGenerator<Buffer>): Promise<FastifyReply> {
  let first: IteratorResult<Buffer>;
  try {
    first = await out.next();
  } catch (e) {
    drain(req);
    throw e;
  }
  reply.header('content-type', 'application/octet-stream');
  if (first.done) {
    drain(req);
    return reply.status(200).send(Buffer.alloc(0));
  }
  const rest = (async function* () {
    try {
      yield first.value;
      yield* out;
    } finally {
      drain(req);
    }
  })();
  return reply.status(200).send(Readable.from(rest, { objectMode: false }));
}

/** Whatever the client still sends is not wanted. */
function drain(req: FastifyRequest): void {
  const body = req.body instanceof Readable ? req.body : undefined;
  if (body && !body.readableEnded) body.resume();
}

export async function cryptoRoutes(ctx: SidecarContext, crypto: CryptoService): Promise<void> {
  await ctx.http.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // the body reaches the handler as a stream, whatever its type
    scope.addContentTypeParser('*', (_req: unknown, payload: Readable, done: (err: null, body: Readable) => void) => done(null, payload));

    scope.put<Route>('/v1.0-alpha1/crypto/:name/encrypt', { schema: schemas.ENCRYPT }, async (req, reply) => {
      const out = await crypto
        .encrypt(
          {
            componentName: req.params.name,
            keyName: header(req, 'dapr-key-name'),
            keyWrapAlgorithm: header(req, 'dapr-key-wrap-algorithm'),
            dataEncryptionCipher: header(req, 'dapr-data-encryption-cipher'),
            decryptionKeyName: header(req, 'dapr-decryption-key-name'),
            omitDecryptionKeyName: TRUTHY.has(header(req, 'dapr-omit-decryption-key-name').toLowerCase()),
          },
          bodyOf(req),
        )
        .catch((e: unknown) => {
          drain(req);
          throw e;
        });
      return send(req, reply, out);
    });

    scope.put<Route>('/v1.0-alpha1/crypto/:name/decrypt', { schema: schemas.DECRYPT }, async (req, reply) => {
      const out = await crypto.decrypt({ componentName: req.params.name, keyName: header(req, 'dapr-key-name') }, bodyOf(req)).catch((e: unknown) => {
        drain(req);
        throw e;
      });
      return send(req, reply, out);
    });
  });
}
