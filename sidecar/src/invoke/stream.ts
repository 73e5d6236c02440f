/** Moving bodies through the internal gRPC stream chunk by chunk, with backpressure both ways. */
import { once } from 'node:events';
import { Readable, type Duplex } from 'node:stream';
import type { InvokeChunk } from './proto.ts';

/** Writes a body as data chunks, waiting for 'drain' when the stream's buffer is full. */
export async function writeBody(source: AsyncIterable<Buffer | Uint8Array | string>, call: Duplex): Promise<void> {
  for await (const chunk of source) {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (data.length === 0) continue;
    if (!call.write({ data })) await once(call, 'drain');
  }
}

/** The data chunks still to come on a stream, as a byte stream. */
export function readBody(it: AsyncIterator<InvokeChunk>): Readable {
  return Readable.from(
    (async function* () {
      for (;;) {
        const next = await it.next();
        if (next.done) return;
        const data = next.value.data;
        if (data && data.length > 0) yield data;
      }
    })(),
    { objectMode: false },
  );
}
