/**
 * `node scripts/openapi.ts`: writes docs/openapi.json, the OpenAPI document a sidecar serves at
 * `GET /v1.0/openapi.json` (sidecar/src/http/openapi.ts), from a sidecar started on free ports
 * with no components. test/http/openapi.test.ts fails while the copy is not current.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startSidecar } from '../sidecar/src/sidecar.ts';

export const OPENAPI_COPY = join(import.meta.dirname, '..', 'docs', 'openapi.json');

/** The document as a sidecar serves it, formatted as docs/openapi.json keeps it. */
export async function servedOpenApi(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rt-openapi-'));
  const sidecar = await startSidecar({ appId: 'openapi', httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [], logger: pino({ level: 'silent' }) });
  try {
    const res = await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/openapi.json`);
    return `${JSON.stringify(await res.json(), null, 2)}\n`;
  } finally {
    await sidecar.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  await writeFile(OPENAPI_COPY, await servedOpenApi());
  console.log(`wrote ${OPENAPI_COPY}`);
}
