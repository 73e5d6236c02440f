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

/**
 * The first message of a stream (a head), and the data chunks after it as a byte stream. Plain
 * events rather than async iterators: this runs twice per call, and iterators cost measurably.
 * The stream is paused while the body's reader is behind.
 */
export function splitHead(call: Duplex): Promise<{ head: InvokeChunk | undefined; body: Readable }> {
  return new Promise((resolve, reject) => {
    let first = true;
    const body = new Readable({ read: () => void call.resume() });
    // a call cut off mid-body must not crash the sidecar when nobody reads that body (a GET's, an
    // error answer's); whoever does read it still sees the error
    body.on('error', () => undefined);
    call.on('data', (m: InvokeChunk) => {
      if (first) {
        first = false;
        resolve({ head: m, body });
        return;
      }
      const data = m.data;
      if (data && data.length > 0 && !body.push(data)) call.pause();
    });
    call.once('end', () => {
      if (first) {
        first = false;
        resolve({ head: undefined, body });
      }
      body.push(null);
    });
    call.on('error', (e: Error) => {
      if (first) {
        first = false;
        reject(e);
      } else body.destroy(e);
    });
  });
}
