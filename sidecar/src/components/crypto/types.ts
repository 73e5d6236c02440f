/**
 * What a crypto provider offers the cryptography building block (sidecar/src/crypto/): wrapping
 * and unwrapping a message's file key with a key it holds, as the reference's SubtleCrypto
 * WrapKey/UnwrapKey. The key never leaves the provider.
 */
import type { Component } from '../types.ts';

/**
 * The request cannot be served with the key it names: no such key, a key of another type or
 * size, an algorithm the key or the provider does not do, a wrapped key that does not unwrap.
 * The caller's to fix: the API answers 400.
 */
export class KeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyError';
  }
}

export interface WrapKeyRequest {
  plaintextKey: Buffer;
  /** A canonical key-wrap name (A256KW, RSA-OAEP-256, …). */
  algorithm: string;
  keyName: string;
}

export interface UnwrapKeyRequest {
  wrappedKey: Buffer;
  algorithm: string;
  keyName: string;
}

export interface CryptoProvider extends Component {
  wrapKey(req: WrapKeyRequest): Promise<Buffer>;
  unwrapKey(req: UnwrapKeyRequest): Promise<Buffer>;
}

export function isCryptoProvider(c: Component | undefined): c is CryptoProvider {
  return typeof (c as Partial<CryptoProvider> | undefined)?.wrapKey === 'function' && typeof (c as Partial<CryptoProvider>).unwrapKey === 'function';
}
