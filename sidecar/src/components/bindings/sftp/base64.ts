/** Strict base64 for `create`'s data, checked in one pass before anything is sent. */
import { malformed } from '../../../http/errors.ts';

/** Base64 characters decoded per step: 4 MiB of text → 3 MiB of bytes (a multiple of 4). */
export const DECODE_SLICE = 4 * 1024 * 1024;

/**
 * Checks that `data` is standard base64 (RFC 4648 §4 alphabet, padding required, no line
 * breaks) before anything on the server is touched; throws a 400 ApiError otherwise.
 *
 * Node's decoder skips characters outside the alphabet, so decoding a slice of 4n characters
 * yields exactly 3n bytes (less the padding) only when every character was valid; it also
 * accepts the URL alphabet's "-" and "_", which we reject apart. Decoding into one scratch
 * buffer runs at native speed (about 30 ms per 100 MB) without allocating.
 */
export function assertBase64(data: string): void {
  const bad = (why: string) => malformed(`data must be the file content in standard base64 (A-Z a-z 0-9 + /, padded with =, no line breaks): ${why}`);
  if (data.length % 4 !== 0) throw bad(`its length (${data.length}) is not a multiple of 4`);
  if (data.includes('-') || data.includes('_')) throw bad('it uses the URL-safe alphabet ("-", "_")');
  const scratch = Buffer.allocUnsafe((Math.min(DECODE_SLICE, data.length) / 4) * 3);
  for (let i = 0; i < data.length; i += DECODE_SLICE) {
    const end = Math.min(data.length, i + DECODE_SLICE);
    const slice = data.slice(i, end);
    const pad = end === data.length ? padding(slice) : 0;
    if (pad > 2 || scratch.write(slice, 0, 'base64') !== ((end - i) / 4) * 3 - pad) {
      throw bad(`invalid character or misplaced padding near position ${i}`);
    }
  }
}

function padding(s: string): number {
  let n = 0;
  while (n < s.length && s.charCodeAt(s.length - 1 - n) === 0x3d) n++;
  return n;
}

/**
 * The same strict check and decoding for base64 text that arrives in pieces cut anywhere:
 * `push` returns the bytes of the complete groups seen so far (the last group is held back,
 * since only the last may carry padding), `end` those of the rest. Throws a 400 ApiError at the
 * first piece that breaks the grammar; `position` in its message counts characters.
 */
export class Base64Decoder {
  /** The last group seen (1–4 characters), not decoded yet. */
  private readonly held = Buffer.alloc(4);
  private heldLen = 0;
  private seen = 0;
  /** Decoded bytes; reused, so a result is valid until the next call. */
  private out = Buffer.alloc(0);

  /** Bytes of the complete groups so far; valid until the next push or end. */
  push(text: Buffer): Buffer {
    const held = this.heldLen;
    // decode all but the last 1–4 characters: they may be the final, padded group
    const cut = held + text.length <= 4 ? 0 : Math.floor((held + text.length - 1) / 4) * 4;
    if (cut === 0) {
      text.copy(this.held, held);
      this.heldLen += text.length;
      return this.out.subarray(0, 0);
    }
    this.reserve((cut / 4) * 3);
    let n = 0;
    let from = 0;
    if (held > 0) {
      // complete the held group from the start of `text`
      from = 4 - held;
      text.copy(this.held, held, 0, from);
      n = this.decode(this.held, 0, false);
    }
    const used = cut - held; // characters of `text` decoded now
    n += this.decode(text.subarray(from, used), n, false);
    this.heldLen = text.copy(this.held, 0, used);
    return this.out.subarray(0, n);
  }

  /** Bytes of the last group; throws when the text as a whole is not valid base64. */
  end(): Buffer {
    if (this.heldLen === 0) return this.out.subarray(0, 0);
    this.reserve(3);
    const n = this.decode(this.held.subarray(0, this.heldLen), 0, true);
    this.heldLen = 0;
    return this.out.subarray(0, n);
  }

  private reserve(bytes: number): void {
    if (this.out.length < bytes) this.out = Buffer.allocUnsafeSlow(Math.max(bytes, 48 * 1024));
  }

  /** Decodes whole groups of `text` into `out` at `at`; returns the bytes written. */
  private decode(text: Buffer, at: number, last: boolean): number {
    if (text.length === 0) return 0;
    const bad = (why: string) => malformed(`data must be the file content in standard base64 (A-Z a-z 0-9 + /, padded with =, no line breaks): ${why}`);
    if (last && text.length % 4 !== 0) throw bad(`its length (${this.seen + text.length}) is not a multiple of 4`);
    if (text.includes(0x2d) || text.includes(0x5f)) throw bad('it uses the URL-safe alphabet ("-", "_")');
    let pad = 0;
    if (last) while (pad < text.length && text[text.length - 1 - pad] === 0x3d) pad++;
    const want = (text.length / 4) * 3 - pad;
    // Node's decoder skips characters outside the alphabet and stops at "=": a short result
    // means an invalid character or misplaced padding somewhere in this piece
    if (pad > 2 || this.out.write(text.toString('latin1'), at, 'base64') !== want) {
      throw bad(`invalid character or misplaced padding near position ${this.seen}`);
    }
    this.seen += text.length;
    return want;
  }
}
