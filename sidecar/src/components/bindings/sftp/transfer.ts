/**
 * Moving file content over SFTP quickly and in bounded memory.
 *
 * SFTP answers each READ/WRITE request separately, so one request at a time waits a round trip
 * per chunk. Like OpenSSH's `sftp` client, we keep many requests in flight (up to IN_FLIGHT, each
 * as large as the server allows, 255 KiB with OpenSSH; uploads no more than the server's channel
 * window takes), which is what makes large files fast.
 *
 * Uploads decode the base64 text slice by slice straight into WRITE requests (the decoded file
 * never exists whole in memory), into a temporary file that is renamed over the target at the
 * end: readers never see half a file, and a failed upload leaves the old one intact. A streamed
 * upload (uploadStreamed) decodes the text as the HTTP body brings it, with backpressure: the
 * body is read no faster than the server acknowledges WRITEs.
 * Downloads are a Readable that keeps IN_FLIGHT reads ahead of the consumer.
 */
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import type { FileEntryWithStats, Stats } from 'ssh2';
import { Base64Decoder, DECODE_SLICE } from './base64.ts';
import type { Session } from './connection.ts';

/** Requests kept in flight per transfer, at most. */
export const IN_FLIGHT = 16;
/** Bytes of a WRITE request besides its data (id, handle, offset, lengths), rounded up. */
const WRITE_OVERHEAD = 64;

/**
 * WRITE requests an upload keeps in flight: those that fit in the server's channel window with
 * one to spare (OpenSSH's 2 MiB window: 7 of 255 KiB), at least 1, at most IN_FLIGHT. The rest
 * would wait inside ssh2 for the server's WINDOW_ADJUST, long enough for V8 to move their packets
 * to the old generation, where only a full collection frees them: tens of MB of garbage per 100 MB
 * uploaded (bench/results/sftp.md). Throughput is the same: the window is the limit either way.
 */
export function writesInFlight(maxWriteLen: number, sendWindow: number): number {
  return Math.max(1, Math.min(IN_FLIGHT, Math.floor(sendWindow / (maxWriteLen + WRITE_OVERHEAD)) - 1));
}
/** SFTP status codes we map to messages (draft-ietf-secsh-filexfer-02). */
export const SFTP_NO_SUCH_FILE = 2;
export const SFTP_PERMISSION_DENIED = 3;
/** Names of in-progress uploads; `list` hides them. */
export const TEMP_NAME = /^\..+\.rt-upload-[0-9a-f]{16}$/;

// ------------------------------------------------------------------ promisified SFTP calls

/**
 * Sends one request. ssh2 silently drops requests written to a closed channel (their callback
 * never runs), so a closed session fails here at once instead of hanging the call.
 */
function call<T>(s: Session, send: (cb: (err: Error | null | undefined, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const out = (s.sftp as unknown as { outgoing?: { state?: string } }).outgoing;
    if (!s.alive || (out && out.state !== 'open')) {
      reject(new Error('the SFTP connection is closed'));
      return;
    }
    send((err, value) => (err ? reject(err) : resolve(value)));
  });
}

export function open(s: Session, path: string, flags: 'r' | 'w'): Promise<Buffer> {
  return call(s, (cb) => s.sftp.open(path, flags, cb));
}

export function closeHandle(s: Session, handle: Buffer): Promise<void> {
  return call(s, (cb) => s.sftp.close(handle, (err) => cb(err, undefined)));
}

export function stat(s: Session, path: string): Promise<Stats> {
  return call(s, (cb) => s.sftp.stat(path, cb));
}

function fstat(s: Session, handle: Buffer): Promise<Stats> {
  return call(s, (cb) => s.sftp.fstat(handle, cb));
}

function mkdir(s: Session, path: string): Promise<void> {
  return call(s, (cb) => s.sftp.mkdir(path, (err) => cb(err, undefined)));
}

export function unlink(s: Session, path: string): Promise<void> {
  return call(s, (cb) => s.sftp.unlink(path, (err) => cb(err, undefined)));
}

export function readdir(s: Session, path: string): Promise<FileEntryWithStats[]> {
  return call(s, (cb) => s.sftp.readdir(path, cb));
}

function rename(s: Session, from: string, to: string, posixRename: boolean): Promise<void> {
  return call(s, (cb) => (posixRename ? s.sftp.ext_openssh_rename(from, to, (err) => cb(err, undefined)) : s.sftp.rename(from, to, (err) => cb(err, undefined))));
}

function write(s: Session, handle: Buffer, buf: Buffer, off: number, len: number, pos: number): Promise<void> {
  return call(s, (cb) => s.sftp.write(handle, buf, off, len, pos, (err) => cb(err, undefined)));
}

/** Bytes read; 0 at end of file (SFTP reports EOF as status 1). */
function read(s: Session, handle: Buffer, buf: Buffer, off: number, len: number, pos: number): Promise<number> {
  return call<number>(s, (cb) => s.sftp.read(handle, buf, off, len, pos, (err, n) => cb(err, n))).catch((e: unknown) => {
    if ((e as { code?: unknown }).code === 1) return 0;
    throw e;
  });
}

/** Renames over an existing target: posix-rename@openssh.com when offered, else remove + rename. */
async function replace(s: Session, from: string, to: string): Promise<void> {
  const ext = (s.sftp as unknown as { _extensions?: Record<string, string> })._extensions ?? {};
  if (ext['posix-rename@openssh.com'] === '1') return rename(s, from, to, true);
  await rename(s, from, to, false).catch(async () => {
    await unlink(s, to).catch(() => undefined);
    await rename(s, from, to, false);
  });
}

// ------------------------------------------------------------------ directories

/** Creates `dir` and its missing parents, never above `root` (which must exist). */
export async function mkdirp(s: Session, root: string, dir: string): Promise<void> {
  const st = await stat(s, dir).catch((e: unknown) => {
    if ((e as { code?: unknown }).code === SFTP_NO_SUCH_FILE) return undefined;
    throw e;
  });
  if (st) {
    if (!st.isDirectory()) throw Object.assign(new Error(`"${dir}" exists and is not a directory`), { code: 4 });
    return;
  }
  if (dir === root) throw Object.assign(new Error(`rootPath "${root}" does not exist on the server`), { code: SFTP_NO_SUCH_FILE });
  await mkdirp(s, root, posix.dirname(dir));
  await mkdir(s, dir).catch(async (e: unknown) => {
    // another call may have created it meanwhile
    const again = await stat(s, dir).catch(() => undefined);
    if (!again?.isDirectory()) throw e;
  });
}

// ------------------------------------------------------------------ upload

/**
 * WRITE requests for consecutive bytes, at most writesInFlight outstanding, each filled up to
 * maxWriteLen. ssh2 copies a WRITE's data into its packet when the request is made (no request
 * is longer than maxWriteLen, so none is split for later): the caller's buffers and our block
 * may be reused as soon as `write` returns.
 */
class RemoteWriter {
  private readonly pending = new Set<Promise<void>>();
  private failure: unknown;
  private pos = 0;
  private readonly block: Buffer;
  private filled = 0;
  private readonly s: Session;
  private readonly handle: Buffer;
  private readonly limit: number;

  constructor(s: Session, handle: Buffer) {
    this.s = s;
    this.handle = handle;
    this.block = Buffer.allocUnsafe(s.maxWriteLen);
    this.limit = writesInFlight(s.maxWriteLen, s.sendWindow);
  }

  async write(bytes: Buffer): Promise<void> {
    let off = 0;
    // a partly filled block is completed first; whole blocks go straight from `bytes`
    while (off < bytes.length) {
      if (this.filled === 0 && bytes.length - off >= this.block.length) {
        await this.send(bytes, off, this.block.length);
        off += this.block.length;
        continue;
      }
      const n = bytes.copy(this.block, this.filled, off);
      this.filled += n;
      off += n;
      if (this.filled === this.block.length) await this.flush();
    }
  }

  /** Sends what is left and waits for every answer. */
  async finish(): Promise<void> {
    await this.flush();
    await Promise.all(this.pending);
    if (this.failure) throw this.failure;
  }

  /** Waits for the answers of the requests sent, without sending what is left. */
  async drain(): Promise<void> {
    await Promise.all(this.pending);
  }

  private async flush(): Promise<void> {
    if (this.filled === 0) return;
    const n = this.filled;
    this.filled = 0;
    await this.send(this.block, 0, n);
  }

  private async send(buf: Buffer, off: number, len: number): Promise<void> {
    while (this.pending.size >= this.limit) await Promise.race(this.pending);
    if (this.failure) throw this.failure;
    const p: Promise<void> = write(this.s, this.handle, buf, off, len, this.pos).then(
      () => void this.pending.delete(p),
      (e: unknown) => {
        this.failure ??= e;
        this.pending.delete(p);
      },
    );
    this.pending.add(p);
    this.pos += len;
  }
}

/** A temporary name beside `remote` for its upload. */
function tempBeside(remote: string): string {
  return posix.join(posix.dirname(remote), `.${posix.basename(remote)}.rt-upload-${randomBytes(8).toString('hex')}`);
}

/**
 * Writes `fill`'s bytes to the temporary file `tmp` (its folder made when missing), then hands
 * it to `settle`, which moves it to its place. On any failure the temporary file is removed; one
 * that cannot be (the connection died) goes to `orphaned`, to be removed once connected again.
 */
async function uploadVia(
  s: Session,
  root: string,
  tmp: string,
  fill: (w: RemoteWriter) => Promise<void>,
  settle: (tmp: string) => Promise<void>,
  orphaned: (path: string) => void,
): Promise<void> {
  // the folder usually exists: try first, make folders only when the server says it is missing
  const handle = await open(s, tmp, 'w').catch(async (e: unknown) => {
    if ((e as { code?: unknown }).code !== SFTP_NO_SUCH_FILE) throw e;
    await mkdirp(s, root, posix.dirname(tmp));
    return open(s, tmp, 'w');
  });
  let closed = false;
  try {
    const w = new RemoteWriter(s, handle);
    // on failure the answers still due are awaited: the handle is closed after them
    await fill(w).catch(async (e: unknown) => {
      await w.drain();
      throw e;
    });
    await w.finish();
    closed = true;
    await closeHandle(s, handle);
    await settle(tmp);
  } catch (e) {
    if (!closed) await closeHandle(s, handle).catch(() => undefined);
    await unlink(s, tmp).catch((ue: unknown) => {
      if ((ue as { code?: unknown }).code !== SFTP_NO_SUCH_FILE) orphaned(tmp);
    });
    throw e;
  }
}

/** Writes the decoded base64 text to `remote` atomically; `data` must have passed assertBase64. */
export async function uploadBase64(s: Session, root: string, remote: string, data: string, orphaned: (path: string) => void = () => undefined): Promise<void> {
  await uploadVia(
    s,
    root,
    tempBeside(remote),
    async (w) => {
      // one decode buffer for the whole upload (the writer copies what it sends)
      const scratch = Buffer.allocUnsafe((Math.min(DECODE_SLICE, data.length) / 4) * 3);
      for (let i = 0; i < data.length; i += DECODE_SLICE) {
        await w.write(scratch.subarray(0, scratch.write(data.slice(i, i + DECODE_SLICE), 0, 'base64')));
      }
    },
    (tmp) => replace(s, tmp, remote),
    orphaned,
  );
}

/**
 * Writes base64 text arriving in pieces (checked as it comes; a bad piece fails the upload with
 * a 400 and leaves any existing file intact) to a temporary file, then asks `target` where it
 * goes — the request's metadata may come after its data — and renames it there atomically.
 * `near` is where the file will probably go (the metadata seen before the data), so that the
 * temporary file is beside it; without it, the temporary file is made in `root`.
 */
export async function uploadStreamed(
  s: Session,
  root: string,
  near: string | undefined,
  text: AsyncIterable<Buffer>,
  target: () => Promise<string>,
  orphaned: (path: string) => void = () => undefined,
): Promise<void> {
  const tmp = near ? tempBeside(near) : posix.join(root, `.stream.rt-upload-${randomBytes(8).toString('hex')}`);
  await uploadVia(
    s,
    root,
    tmp,
    async (w) => {
      const dec = new Base64Decoder();
      for await (const piece of text) {
        const bytes = dec.push(piece);
        if (bytes.length) await w.write(bytes);
      }
      await w.write(dec.end());
    },
    async (from) => {
      const remote = await target();
      if (posix.dirname(remote) !== posix.dirname(from)) await mkdirp(s, root, posix.dirname(remote));
      await replace(s, from, remote);
    },
    orphaned,
  );
}

// ------------------------------------------------------------------ download

/** Opens `remote` for reading; rejects with the SFTP status error when it cannot. */
export async function openDownload(s: Session, remote: string): Promise<{ stream: Readable; size: number }> {
  const handle = await open(s, remote, 'r');
  try {
    const st = await fstat(s, handle);
    if (st.isDirectory()) throw Object.assign(new Error(`"${remote}" is a directory`), { code: 4, isDirectory: true });
    return { stream: new DownloadStream(s, handle, st.size), size: st.size };
  } catch (e) {
    await closeHandle(s, handle).catch(() => undefined);
    throw e;
  }
}

/** The file's bytes in order, with IN_FLIGHT reads of maxReadLen kept ahead of the consumer. */
class DownloadStream extends Readable {
  private readonly s: Session;
  private readonly handle: Buffer;
  private size: number;
  private next = 0;
  private readonly ahead: { len: number; data: Promise<Buffer> }[] = [];
  private pumping = false;
  private released = false;

  constructor(s: Session, handle: Buffer, size: number) {
    super({ highWaterMark: 1024 * 1024 });
    this.s = s;
    this.handle = handle;
    this.size = size;
  }

  override _read(): void {
    if (!this.pumping) void this.pump();
  }

  private fill(): void {
    const chunk = this.s.maxReadLen;
    while (this.ahead.length < IN_FLIGHT && this.next < this.size) {
      const len = Math.min(chunk, this.size - this.next);
      const data = this.block(this.next, len);
      data.catch(() => undefined); // awaited in order below; a destroyed stream drops them
      this.ahead.push({ len, data });
      this.next += len;
    }
  }

  /** One block; a short read that is not EOF asks again for the rest. */
  private async block(pos: number, len: number): Promise<Buffer> {
    const buf = Buffer.allocUnsafe(len);
    let got = 0;
    while (got < len) {
      const n = await read(this.s, this.handle, buf, got, len - got, pos + got);
      if (n === 0) break;
      got += n;
    }
    return got === len ? buf : buf.subarray(0, got);
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      for (;;) {
        if (this.destroyed) return;
        this.fill();
        const head = this.ahead.shift();
        if (!head) {
          await this.release();
          this.push(null);
          return;
        }
        const buf = await head.data;
        if (this.destroyed) return;
        if (buf.length < head.len) {
          // the file shrank while we read it: end where it ends now
          this.size = 0;
          this.ahead.length = 0;
        }
        if (buf.length && !this.push(buf)) return;
      }
    } catch (e) {
      this.destroy(e as Error);
    } finally {
      this.pumping = false;
    }
  }

  private async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    // a dead server never answers CLOSE; do not hold the stream's end for it
    await Promise.race([closeHandle(this.s, this.handle).catch(() => undefined), new Promise((r) => setTimeout(r, 2000).unref())]);
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    this.release().then(() => cb(err), () => cb(err));
  }
}
