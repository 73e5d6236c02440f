/**
 * crypto.dapr.localstorage: keys are files in the folder `path`, named by their file name
 * (`.json`: a JWK, `.pem`: PEM, otherwise told by their first bytes; keys.ts). A key is read
 * at each use, so a replaced file takes effect at once. A name never reaches outside the
 * folder: `..`, an absolute path or a NUL is refused (as the reference refuses `..`), and a
 * symbolic link is followed only when its target is inside the folder too.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { extname, isAbsolute, join, sep } from 'node:path';
import { decodeMetadata } from '../../metadata/decode.ts';
import type { ComponentSpec } from '../../types.ts';
import { parseKey, unwrapWith, wrapWith, type StoredKey } from '../keys.ts';
import { KeyError, type CryptoProvider, type UnwrapKeyRequest, type WrapKeyRequest } from '../types.ts';
import { METADATA } from './metadata.ts';

class LocalStorageCrypto implements CryptoProvider {
  private root = '';

  async init(spec: ComponentSpec): Promise<void> {
    const { path } = decodeMetadata(METADATA, spec.metadata);
    let info;
    try {
      this.root = await realpath(path);
      info = await stat(this.root);
    } catch (e) {
      throw new Error(`could not stat path '${path}': ${(e as Error).message}`);
    }
    if (!info.isDirectory()) throw new Error(`path '${path}' is not a directory`);
  }

  capabilities(): string[] {
    return [];
  }

  private async key(name: string): Promise<StoredKey> {
    if (!name || name.includes('..') || name.includes('\0') || isAbsolute(name)) throw new KeyError(`invalid key name '${name.slice(0, 80)}': it must be a file name inside the key folder, without '..'`);
    let file: string;
    try {
      file = await realpath(join(this.root, name));
    } catch {
      throw new KeyError(`key '${name.slice(0, 80)}' not found`);
    }
    if (!file.startsWith(this.root + sep)) throw new KeyError(`key '${name.slice(0, 80)}' not found: it leads outside the key folder`);
    let raw: Buffer;
    try {
      raw = await readFile(file);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EISDIR' || code === 'ENOENT') throw new KeyError(`key '${name.slice(0, 80)}' not found`);
      throw new Error(`failed to load key '${name.slice(0, 80)}': ${(e as Error).message}`);
    }
    const ext = extname(file).toLowerCase();
    try {
      return parseKey(raw, ext === '.json' ? 'json' : ext === '.pem' ? 'pem' : undefined);
    } catch (e) {
      throw new KeyError(`failed to parse key '${name.slice(0, 80)}': ${(e as Error).message}`);
    }
  }

  async wrapKey(req: WrapKeyRequest): Promise<Buffer> {
    return wrapWith(await this.key(req.keyName), req.algorithm, req.plaintextKey);
  }

  async unwrapKey(req: UnwrapKeyRequest): Promise<Buffer> {
    return unwrapWith(await this.key(req.keyName), req.algorithm, req.wrappedKey);
  }

  async close(): Promise<void> {}
}

export const factory = () => new LocalStorageCrypto();
