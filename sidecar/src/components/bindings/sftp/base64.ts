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
