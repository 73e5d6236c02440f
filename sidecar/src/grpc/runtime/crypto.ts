/**
 * EncryptAlpha1 and DecryptAlpha1 on the cryptography block's service (crypto/service.ts), as
 * the reference serves them: bidirectional streams whose first message carries the options
 * (within 5 s) and may carry the first chunk; each later message carries only a chunk, its seq
 * one more than the last. Output goes back as chunks numbered from 0, one per segment, written
 * as the client reads them (backpressure both ways: a chunk is read only when the format needs
 * it). A failure before the first output, or later, ends the call with the error table's status.
 */
import * as grpc from '@grpc/grpc-js';
import { ERRORS, fail } from '../../api/errors.ts';
import type { SidecarContext } from '../../context.ts';
import type { CryptoService } from '../../crypto/service.ts';
import { GrpcServer } from '../server.ts';
import { toStatus } from './errors.ts';
import { bytesOf, MalformedMessage } from './handler.ts';

/** How long the first message (the options) may take, as the reference waits. */
export const FIRST_MESSAGE_TIMEOUT_MS = 5_000;

interface StreamPayload {
  data: Uint8Array;
  seq: number;
}

interface CryptoRequest<O> {
  options: O | null;
  payload: StreamPayload | null;
}

interface EncryptOptions {
  component_name: string;
  key_name: string;
  key_wrap_algorithm: string;
  data_encryption_cipher: string;
  omit_decryption_key_name: boolean;
  decryption_key_name: string;
}

interface DecryptOptions {
  component_name: string;
  key_name: string;
}

type Call<O> = grpc.ServerDuplexStream<CryptoRequest<O>, { payload: StreamPayload }>;

/** The call's messages, and a promise that rejects when the client cancels (a read waiting for a message must not wait forever). */
type Incoming<O> = AsyncIterator<CryptoRequest<O> | MalformedMessage> & { cancelled: Promise<never> };

const badRequest = (message: string) => fail(ERRORS.CRYPTO_BAD_REQUEST, `invalid request: ${message}`);

/** The first message, or a 400 when none came in time. */
async function firstMessage<O>(it: Incoming<O>): Promise<CryptoRequest<O>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(badRequest(`no first message within ${FIRST_MESSAGE_TIMEOUT_MS / 1000} s`)), FIRST_MESSAGE_TIMEOUT_MS);
  });
  try {
    const r = await Promise.race([it.next(), timeout, it.cancelled]);
    if (r.done) throw badRequest('the stream ended before its first message');
    if (r.value instanceof MalformedMessage) throw badRequest(r.value.message);
    if (!r.value.options) throw badRequest('first message does not contain the required options');
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}

/** The payload chunks: the first message's, then each later message's, in sequence. */
async function* chunks<O>(first: CryptoRequest<O>, it: Incoming<O>): AsyncGenerator<Uint8Array> {
  let expect = 0;
  let msg: CryptoRequest<O> | MalformedMessage = first;
  for (;;) {
    if (msg instanceof MalformedMessage) throw badRequest(msg.message);
    if (msg !== first && msg.options) throw badRequest('options found in non-leading message');
    if (msg.payload) {
      const seq = Number(msg.payload.seq);
      if (seq !== expect) throw badRequest(`invalid sequence number received: ${seq} (expected: ${expect})`);
      expect++;
      const data = bytesOf(msg.payload.data);
      if (data.length) yield data;
    }
    const r = await Promise.race([it.next(), it.cancelled]);
    if (r.done) return;
    msg = r.value;
  }
}

/** Writes the output as numbered chunks, waiting when the client reads slower. */
async function respond<O>(call: Call<O>, out: AsyncGenerator<Buffer>): Promise<void> {
  let seq = 0;
  for await (const data of out) {
    if (call.cancelled || call.destroyed) {
      await out.return(undefined);
      return;
    }
    if (!call.write({ payload: { data, seq: seq++ } })) await new Promise<void>((resolve) => call.once('drain', resolve).once('close', resolve));
  }
  call.end();
}

function handler<O>(ctx: SidecarContext, run: (crypto: CryptoService, options: O, source: AsyncIterable<Uint8Array>) => Promise<AsyncGenerator<Buffer>>): grpc.handleBidiStreamingCall<CryptoRequest<O>, { payload: StreamPayload }> {
  return (call) => {
    if (!ctx.grpc.authorized(call.metadata)) {
      call.emit('error', GrpcServer.unauthenticated());
      return;
    }
    const cancelled = new Promise<never>((_, reject) => call.once('cancelled', () => reject(new Error('the client cancelled the call'))));
    cancelled.catch(() => undefined);
    const it: Incoming<O> = Object.assign((call as AsyncIterable<CryptoRequest<O> | MalformedMessage>)[Symbol.asyncIterator](), { cancelled });
    void (async () => {
      const crypto = ctx.services.crypto;
      if (!crypto) throw new Error('the cryptography block is not running');
      const first = await firstMessage(it);
      const out = await run(crypto, first.options!, { [Symbol.asyncIterator]: () => chunks(first, it) });
      await respond(call, out);
    })().catch((e: unknown) => {
      if (!call.cancelled && !call.destroyed) call.emit('error', toStatus(e));
    });
  };
}

export function cryptoStreams(ctx: SidecarContext): Record<string, grpc.UntypedHandleCall> {
  return {
    EncryptAlpha1: handler<EncryptOptions>(ctx, (crypto, o, source) =>
      crypto.encrypt(
        {
          componentName: o.component_name,
          keyName: o.key_name,
          keyWrapAlgorithm: o.key_wrap_algorithm,
          dataEncryptionCipher: o.data_encryption_cipher,
          omitDecryptionKeyName: o.omit_decryption_key_name,
          decryptionKeyName: o.decryption_key_name,
        },
        source,
      ),
    ),
    DecryptAlpha1: handler<DecryptOptions>(ctx, (crypto, o, source) => crypto.decrypt({ componentName: o.component_name, keyName: o.key_name }, source)),
  };
}
