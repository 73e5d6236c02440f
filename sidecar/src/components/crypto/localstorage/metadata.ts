/** The metadata of crypto.dapr.localstorage, apart from its code (the operator reads it). */
import { defineMetadata } from '../../metadata/decode.ts';

export const METADATA = defineMetadata('crypto.dapr.localstorage', {
  path: { type: 'string', required: true, doc: 'a folder of key files (PEM, JWK JSON or raw symmetric); a key is named by its file name' },
});
