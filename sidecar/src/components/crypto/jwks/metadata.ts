/** The metadata of crypto.dapr.jwks, apart from its code (the operator reads it). */
import { defineMetadata } from '../../metadata/decode.ts';

export const METADATA = defineMetadata('crypto.dapr.jwks', {
  jwks: { type: 'string', required: true, doc: 'the JWKS: its JSON (optionally base64), the path of a file holding it, or an https:// URL serving it' },
  requestTimeout: { type: 'duration', default: 30_000, doc: 'how long fetching the JWKS from its URL may take' },
  minRefreshInterval: { type: 'duration', default: 600_000, doc: 'how often a JWKS from a URL is fetched again' },
  caCertificate: { type: 'string', doc: "rt's own: PEM certificates trusted (besides the system's) for the JWKS URL's server" },
});
