/** Byte streams for the crypto tests: a buffer as chunks, and chunks back into one buffer. */
export async function* chunked(buf: Buffer, size = 7919): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

export async function collect(gen: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of gen) out.push(Buffer.from(c));
  return Buffer.concat(out);
}
