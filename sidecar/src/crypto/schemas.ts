/** The cryptography HTTP routes' schemas (http/schema.ts). */
import { route } from '../http/schema.ts';

const NAME = { name: 'the crypto component' };

export const ENCRYPT = route('crypto.encrypt', 'Encrypt a stream in the dapr.io/enc/v1 format with a key of a crypto component (alpha)', {
  params: NAME,
  anyBody: 'the plaintext, any bytes, streamed',
  headers: {
    'dapr-key-name': 'required: the key that wraps the message key',
    'dapr-key-wrap-algorithm': 'required: A256KW (alias AES) or RSA-OAEP-256 (alias RSA), any case',
    'dapr-data-encryption-cipher': 'AES-GCM (default) or CHACHA20-POLY1305',
    'dapr-decryption-key-name': 'the key name written in the header for decryption (default: dapr-key-name)',
    'dapr-omit-decryption-key-name': 'true: write no key name in the header',
  },
  responses: { '200': 'the ciphertext (application/octet-stream), streamed' },
});

export const DECRYPT = route('crypto.decrypt', 'Decrypt a dapr.io/enc/v1 stream with a key of a crypto component (alpha)', {
  params: NAME,
  anyBody: 'the ciphertext, streamed',
  headers: { 'dapr-key-name': 'the key that unwraps the message key, instead of the one named in the header' },
  responses: { '200': 'the plaintext (application/octet-stream), streamed; each segment is sent only once verified' },
});

export const CRYPTO_SCHEMAS = [ENCRYPT, DECRYPT];
