/**
 * bindings.sftp (v1): an output binding for files on an SFTP server (OpenSSH and compatible).
 *
 * Operations, all with paths relative to `rootPath` (see paths.ts for confinement):
 *   create  data = base64 file content, metadata.fileName → {"fileName"}; parent folders made
 *   get     metadata.fileName → the file's bytes (streamed)
 *   list    optional metadata.fileName = a folder → JSON array of names, folders end with "/"
 *   delete  metadata.fileName → 204
 *
 * The ssh2 library is imported in init, so sidecars without an SFTP component never load it.
 */
import type { Logger } from 'pino';
import { ApiError, errorMessage, malformed } from '../../../http/errors.ts';
import type { BindingRequest, BindingResponse, ComponentContext, ComponentSpec, OutputBinding, StreamedBindingRequest } from '../../types.ts';
import { isStatusError, SftpConnection, type Session } from './connection.ts';
import { loadSsh2, type Ssh2Module } from './ssh2.ts';
import { parseMetadata, type SftpMetadata } from './metadata.ts';
import { resolveInRoot } from './paths.ts';
import { assertBase64 } from './base64.ts';
import {
  openDownload,
  readdir,
  SFTP_NO_SUCH_FILE,
  SFTP_PERMISSION_DENIED,
  stat,
  TEMP_NAME,
  unlink,
  uploadBase64,
  uploadStreamed,
} from './transfer.ts';

export const OPERATIONS = ['create', 'get', 'list', 'delete'] as const;

const ERR = 'ERR_INVOKE_OUTPUT_BINDING';

export class SftpBinding implements OutputBinding {
  private name = 'sftp';
  private md: SftpMetadata | undefined;
  private conn: SftpConnection | undefined;
  private log: Logger | undefined;

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    this.name = spec.name;
    const md = parseMetadata(spec.metadata);
    const ssh2 = await loadSsh2();
    if (md.privateKey !== undefined) checkPrivateKey(ssh2, md.privateKey, md.privateKeyPassphrase);
    this.log = ctx.log.child({ component: spec.name });
    if (md.hostKeys.kind === 'insecure') {
      this.log.warn(`insecureIgnoreHostKey is true: the identity of ${md.host}:${md.port} is NOT verified; set hostPublicKey or knownHostsFile`);
    }
    this.md = md;
    this.conn = new SftpConnection(ssh2, md, this.log);
    // connect now, so a wrong address, credential, host key or rootPath stops the start
    await this.conn.run(async (s) => {
      const st = await stat(s, md.rootPath).catch((e: unknown) => {
        throw new Error(`rootPath "${md.rootPath}" cannot be read on the server: ${errorMessage(e)}`);
      });
      if (!st.isDirectory()) throw new Error(`rootPath "${md.rootPath}" on the server is not a directory`);
    });
  }

  capabilities(): string[] {
    return ['OUTPUT_BINDING'];
  }

  operations(): string[] {
    return [...OPERATIONS];
  }

  async ping(): Promise<void> {
    await this.connection().acquire();
  }

  async close(): Promise<void> {
    await this.conn?.close();
  }

  async invoke(req: BindingRequest): Promise<BindingResponse> {
    switch (req.operation) {
      case 'create':
        return this.create(req);
      case 'get':
        return this.get(req);
      case 'list':
        return this.list(req);
      case 'delete':
        return this.delete(req);
      default:
        throw malformed(`operation "${req.operation}" is not supported by bindings.sftp; supported: ${OPERATIONS.join(', ')}`);
    }
  }

  private async create(req: BindingRequest): Promise<BindingResponse> {
    const fileName = requiredFileName(req);
    const { remote } = resolveInRoot(this.root(), fileName);
    const data = base64Text(req.data);
    assertBase64(data);
    await this.call('create', fileName, (s) => folderSaysSo(s, remote, () => uploadBase64(s, this.root(), remote, data, (tmp) => this.connection().forget(tmp))));
    return json({ fileName });
  }

  /** create takes its base64 data as the HTTP body brings it. */
  streamedOperations(): string[] {
    return ['create'];
  }

  /**
   * A streamed create: the file is written to a temporary file as the data arrives and renamed
   * to metadata.fileName once the body (whose metadata may follow the data) has been read. No
   * retry on a broken connection: the data already sent cannot be read again.
   */
  async invokeStreamed(req: StreamedBindingRequest): Promise<BindingResponse> {
    const early = req.early?.fileName;
    const near = early && !early.endsWith('/') ? tryResolve(this.root(), early) : undefined;
    let fileName = early ?? '';
    const target = async () => {
      const md = await req.complete();
      fileName = requiredFileName({ operation: req.operation, data: undefined, metadata: md });
      return resolveInRoot(this.root(), fileName).remote;
    };
    let s: Session | undefined;
    let remote: string | undefined;
    try {
      s = await this.connection().acquire();
      await uploadStreamed(s, this.root(), near, req.data, async () => (remote = await target()), (tmp) => this.connection().forget(tmp));
    } catch (e) {
      throw this.failure('create', fileName, s && remote ? await asFolderError(s, remote, e) : e);
    }
    return json({ fileName });
  }

  private async get(req: BindingRequest): Promise<BindingResponse> {
    const fileName = requiredFileName(req);
    const { remote } = resolveInRoot(this.root(), fileName);
    const { stream } = await this.call('get', fileName, (s) => openDownload(s, remote));
    stream.on('error', (e) => this.log?.warn({ fileName }, `SFTP download broke off: ${e.message}`));
    return { data: stream, contentType: 'application/octet-stream' };
  }

  private async list(req: BindingRequest): Promise<BindingResponse> {
    const dir = req.metadata.fileName ?? '';
    const { remote } = resolveInRoot(this.root(), dir === '' ? '.' : dir, { allowRoot: true });
    const entries = await this.call('list', dir || '.', (s) => readdir(s, remote));
    const names = entries
      .filter((e) => e.filename !== '.' && e.filename !== '..' && !TEMP_NAME.test(e.filename))
      .map((e) => (e.attrs.isDirectory() ? `${e.filename}/` : e.filename))
      .sort();
    return json(names);
  }

  private async delete(req: BindingRequest): Promise<BindingResponse> {
    const fileName = requiredFileName(req);
    const { remote } = resolveInRoot(this.root(), fileName);
    await this.call('delete', fileName, (s) => folderSaysSo(s, remote, () => unlink(s, remote)));
    return {};
  }

  /** Runs one operation on the shared connection and turns failures into clear API errors. */
  private async call<T>(op: string, fileName: string, fn: (s: Session) => Promise<T>): Promise<T> {
    try {
      return await this.connection().run(fn);
    } catch (e) {
      throw this.failure(op, fileName, e);
    }
  }

  /**
   * A missing file is a 500 ERR_INVOKE_OUTPUT_BINDING, as the ecosystem's binding API answers
   * every component error; `details` carries an ErrorInfo whose reason tells the cases apart.
   */
  private failure(op: string, fileName: string, e: unknown): ApiError {
    if (e instanceof ApiError) return e;
    const prefix = `error invoking output binding "${this.name}" (${op})`;
    const info = (reason: string) => [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'rt.io', metadata: { fileName, operation: op } }];
    if ((e as { isDirectory?: boolean }).isDirectory) {
      const why = op === 'delete' ? '; delete removes files only' : op === 'create' ? '; create writes files only' : '';
      return new ApiError(500, ERR, `${prefix}: "${fileName}" is a directory${why}`, info('SFTP_IS_DIRECTORY'));
    }
    if (isStatusError(e) && e.code === SFTP_NO_SUCH_FILE) {
      const what = op === 'list' ? 'directory' : op === 'create' ? 'parent directory of' : 'file';
      return new ApiError(500, ERR, `${prefix}: ${what} "${fileName}" does not exist below rootPath`, info('SFTP_FILE_NOT_FOUND'));
    }
    if (isStatusError(e) && e.code === SFTP_PERMISSION_DENIED) {
      return new ApiError(500, ERR, `${prefix}: the server denied access to "${fileName}" for user "${this.md?.username}"`, info('SFTP_PERMISSION_DENIED'));
    }
    if (isStatusError(e)) return new ApiError(500, ERR, `${prefix}: the server refused "${fileName}": ${e.message}`, info('SFTP_FAILURE'));
    return new ApiError(500, ERR, `${prefix}: ${errorMessage(e)}`, info('SFTP_CONNECTION'));
  }

  private connection(): SftpConnection {
    if (!this.conn) throw new Error('the SFTP binding is not initialised');
    return this.conn;
  }

  private root(): string {
    if (!this.md) throw new Error('the SFTP binding is not initialised');
    return this.md.rootPath;
  }
}

/**
 * create's data as base64 text. No data is an empty file (gRPC callers cannot send "" apart
 * from nothing); bytes are taken as the base64 text's characters (gRPC's `bytes data`).
 */
function base64Text(data: unknown): string {
  if (data === undefined || data === null) return '';
  if (typeof data === 'string') return data;
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1');
  throw malformed('create needs "data" to be the file content as a base64 string');
}

/** The remote path of `fileName`, or undefined when it is not a valid one (reported later). */
function tryResolve(root: string, fileName: string): string | undefined {
  try {
    return resolveInRoot(root, fileName).remote;
  } catch {
    return undefined;
  }
}

/** The file a create/get/delete names; a trailing "/" names a folder, which these do not take. */
function requiredFileName(req: BindingRequest): string {
  const f = req.metadata.fileName;
  if (f === undefined || f === '') throw malformed(`operation "${req.operation}" needs metadata.fileName (a path relative to the binding's rootPath)`);
  if (f.endsWith('/')) throw malformed(`metadata.fileName "${f}" ends with "/": ${req.operation} needs a file name, not a folder`);
  return f;
}

function json(value: unknown): BindingResponse {
  return { data: Buffer.from(JSON.stringify(value)), contentType: 'application/json' };
}

/** Parses the key now so a wrong key or passphrase fails init with a clear (secret-free) message. */
function checkPrivateKey(ssh2: Ssh2Module, key: string, passphrase: string | undefined): void {
  const parsed = ssh2.utils.parseKey(key, passphrase);
  const first = Array.isArray(parsed) ? parsed[0] : parsed;
  if (first instanceof Error || first === undefined) {
    const msg = first instanceof Error ? first.message : 'no key found';
    if (/encrypted/i.test(msg) && /passphrase/i.test(msg) && passphrase === undefined) {
      throw new Error('privateKey is encrypted: set privateKeyPassphrase');
    }
    if (passphrase !== undefined && /(bad decrypt|passphrase|decrypt|integrity)/i.test(msg)) {
      throw new Error('privateKey cannot be decrypted: privateKeyPassphrase is wrong');
    }
    throw new Error(`privateKey cannot be read: ${msg.replace(/-----BEGIN[\s\S]*/g, '')}`);
  }
}

export const factory = () => new SftpBinding();

/**
 * Runs an operation on `remote`; when the server refuses it with a generic failure (OpenSSH does,
 * for a folder: deleting it, or writing a file onto it) and `remote` is a folder, the error says so.
 */
async function folderSaysSo<T>(s: Session, remote: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw await asFolderError(s, remote, e);
  }
}

/** `e`, or an error that says `remote` is a folder when a generic failure came from one. */
async function asFolderError(s: Session, remote: string, e: unknown): Promise<unknown> {
  if (!isStatusError(e) || e.code === SFTP_NO_SUCH_FILE) return e;
  const st = await stat(s, remote).catch(() => undefined);
  return st?.isDirectory() ? Object.assign(new Error('is a directory'), { code: e.code, isDirectory: true }) : e;
}
