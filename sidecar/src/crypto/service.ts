/**
 * The cryptography building block for both API surfaces (HTTP routes.ts, gRPC
 * grpc/runtime/crypto.ts): encrypt and decrypt a stream with a crypto component's key in the
 * "dapr.io/enc/v1" format (stream.ts). It finds the component (the error table's rows, as the
 * reference names them), checks the options and maps what fails to ERR_CRYPTO: a 400 when it is
 * the caller's input (an algorithm, a key, a ciphertext), a 500 when the component failed. Each
 * operation resolves once what can fail before any output has been checked, so a transport can
 * still answer an error; a failure later ends the output stream with the mapped error.
 */
import type { Logger } from 'pino';
import { ERRORS, fail } from '../api/errors.ts';
import { isCryptoProvider, KeyError, type CryptoProvider } from '../components/crypto/types.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import { ApiError, errorMessage } from '../http/errors.ts';
import { clip, SchemeError } from './scheme.ts';
import type { DecryptOptions, EncryptOptions } from './stream.ts';

export interface EncryptRequest {
  componentName: string;
  keyName: string;
  keyWrapAlgorithm: string;
  dataEncryptionCipher?: string;
  omitDecryptionKeyName?: boolean;
  decryptionKeyName?: string;
}

export interface DecryptRequest {
  componentName: string;
  /** Overrides the key named in the ciphertext's header. */
  keyName?: string;
}

type Source = AsyncIterable<Uint8Array>;

/** The format's code, loaded at the first call: it needs node:crypto, which an idle sidecar does not load. */
let format: Promise<typeof import('./stream.ts')> | undefined;
const encrypt = async (source: Source, opts: EncryptOptions) => (await (format ??= import('./stream.ts'))).encrypt(source, opts);
const decrypt = async (source: Source, opts: DecryptOptions) => (await (format ??= import('./stream.ts'))).decrypt(source, opts);

export class CryptoService {
  private readonly components: ComponentRegistry;
  private readonly log: Logger;

  constructor(components: ComponentRegistry, log: Logger) {
    this.components = components;
    this.log = log;
  }

  private provider(name: string): CryptoProvider {
    const loaded = this.components.namesOf('crypto');
    if (loaded.length === 0) throw fail(ERRORS.CRYPTO_PROVIDERS_NOT_CONFIGURED, `crypto providers not configured${name ? this.components.notLoadedNote(name) : ''}`);
    if (!name) throw fail(ERRORS.CRYPTO_BAD_REQUEST, 'invalid request: missing component name');
    const c = this.components.get(name);
    if (!c || !isCryptoProvider(c.instance)) {
      throw fail(ERRORS.CRYPTO_PROVIDER_NOT_FOUND, `crypto provider ${clip(name)} not found; loaded crypto providers: ${loaded.join(', ')}${this.components.notLoadedNote(name)}`);
    }
    return c.instance;
  }

  /** The ciphertext of `source` (header, then segments). */
  async encrypt(req: EncryptRequest, source: Source): Promise<AsyncGenerator<Buffer>> {
    if (!req.keyName) throw fail(ERRORS.CRYPTO_BAD_REQUEST, "invalid request: missing property 'keyName' (HTTP: header 'dapr-key-name')");
    if (!req.keyWrapAlgorithm) throw fail(ERRORS.CRYPTO_BAD_REQUEST, "invalid request: missing property 'keyWrapAlgorithm' (HTTP: header 'dapr-key-wrap-algorithm')");
    const provider = this.provider(req.componentName);
    try {
      const out = await encrypt(source, {
        keyName: req.keyName,
        keyWrapAlgorithm: req.keyWrapAlgorithm,
        dataEncryptionCipher: req.dataEncryptionCipher,
        omitDecryptionKeyName: req.omitDecryptionKeyName,
        decryptionKeyName: req.decryptionKeyName,
        wrapKey: async (plaintextKey, algorithm, keyName) => {
          try {
            return await provider.wrapKey({ plaintextKey, algorithm, keyName });
          } catch (e) {
            throw wrapped(e, 'failed to wrap the file key');
          }
        },
      });
      return mapped(out);
    } catch (e) {
      throw cryptoError(e);
    }
  }

  /** The plaintext of `source`, segment by verified segment. */
  async decrypt(req: DecryptRequest, source: Source): Promise<AsyncGenerator<Buffer>> {
    const provider = this.provider(req.componentName);
    try {
      const out = await decrypt(source, {
        keyName: req.keyName,
        unwrapKey: (wrappedKey, algorithm, keyName) => provider.unwrapKey({ wrappedKey, algorithm, keyName }),
        onUnwrapError: (e) => this.log.debug({ err: e, component: req.componentName }, 'unwrapping the file key failed'),
      });
      return mapped(out);
    } catch (e) {
      throw cryptoError(e);
    }
  }
}

/** A provider's error with what was being done in front, keeping whose fault it is. */
function wrapped(e: unknown, doing: string): Error {
  if (e instanceof KeyError) return new KeyError(`${doing}: ${e.message}`);
  return new Error(`${doing}: ${errorMessage(e)}`);
}

async function* mapped(gen: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* gen;
  } catch (e) {
    throw cryptoError(e);
  }
}

/** The error table's row for what failed. */
export function cryptoError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof SchemeError || e instanceof KeyError) return fail(ERRORS.CRYPTO_INVALID, `failed to perform operation: ${e.message}`);
  return fail(ERRORS.CRYPTO_FAILED, `failed to perform operation: ${errorMessage(e)}`);
}
