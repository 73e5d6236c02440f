/**
 * The routes' schemas and their validators (sidecar/src/http/schema.ts), property-tested:
 * - the build's validators (ajv's standalone code, images/validators.ts) decide every value as
 *   the validators compiled from the sources do;
 * - a value a schema refuses always gives a 400 with ERR_MALFORMED_REQUEST or the code its schema
 *   names (x-error-code), and a one-line message naming the member;
 * - through a real sidecar, any body (JSON or not) to any route that takes JSON answers 2xx or a 4xx JSON
 *   {"errorCode","message"}, never a 5xx nor fastify's own error shape.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { precompiledModule } from '../../images/validators.ts';
import { ApiError } from '../../sidecar/src/http/errors.ts';
import { validatedSchemas } from '../../sidecar/src/http/route-schemas.ts';
import { newAjv, schemaError, validatorName, type JsonSchema, type ValidateFunction } from '../../sidecar/src/http/schema.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';

/** Values near what the schemas take: their member names, strings, numbers, nulls, arrays, objects. */
const member = fc.constantFrom('key', 'value', 'etag', 'metadata', 'options', 'keys', 'parallelism', 'operations', 'operation', 'request', 'concurrency', 'consistency', 'schedule', 'dueTime', 'ttl', 'repeats', 'data', 'overwrite', 'failurePolicy', 'drop', 'constant', 'interval', 'maxRetries', 'job', 'entryId', 'event', 'contentType', 'storename', '*', 'metadata.a', 'filter');
const leaf = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('', 'first-write', 'strong', 'upsert', '@every 1s', '1h'), fc.integer({ min: -3, max: 3 }), fc.double(), fc.boolean(), fc.constant(null));
const near = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(member, tie('v'), { maxKeys: 4 })),
})).v;
const anyValue = fc.oneof(near, fc.jsonValue({ maxDepth: 3 }));

let dir: string;
let built: Record<string, ValidateFunction>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-schema-test-'));
  // the build's module, made runnable on its own (its ajv runtime helpers come from the repo)
  const file = join(dir, 'validators.mjs');
  await writeFile(file, `import { createRequire } from 'node:module';\nconst require = createRequire(${JSON.stringify(join(import.meta.dirname, '..', '..', 'package.json'))});\n${precompiledModule()}`);
  built = ((await import(pathToFileURL(file).href)) as { PRECOMPILED: Record<string, ValidateFunction> }).PRECOMPILED;
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('route schema validators', () => {
  it('the build compiles every schema, and decides as the validators compiled from the sources', () => {
    const schemas = validatedSchemas();
    expect(Object.keys(built).sort()).toEqual(schemas.map((s) => validatorName(s.$id as string)).sort());
    const ajv = newAjv();
    const fromSources = new Map(schemas.map((s) => [s, ajv.compile(s)]));
    fc.assert(
      fc.property(fc.constantFrom(...schemas), anyValue, (schema, value) => {
        const a = fromSources.get(schema)!;
        const b = built[validatorName(schema.$id as string)]!;
        const ok = a(value);
        expect(b(value)).toBe(ok);
        if (!ok) expect(b.errors?.[0]).toEqual(a.errors?.[0]);
      }),
      { numRuns: 3000 },
    );
  });

  it('answers a refused value with a 400 of its code and a message naming the member', () => {
    const schemas = validatedSchemas();
    const codes = (s: unknown): string[] => (typeof s !== 'object' || s === null ? [] : Object.entries(s).flatMap(([k, v]) => (k === 'x-error-code' ? [v as string] : codes(v))));
    fc.assert(
      fc.property(fc.constantFrom(...schemas), anyValue, fc.constantFrom('params', 'querystring', 'body'), (schema: JsonSchema, value, part) => {
        const fn = built[validatorName(schema.$id as string)]!;
        if (fn(value)) return;
        const e = schemaError(schema, part as 'body', fn.errors ?? [], value);
        expect(e).toBeInstanceOf(ApiError);
        expect(e.status).toBe(400);
        expect(['ERR_MALFORMED_REQUEST', ...codes(schema)]).toContain(e.errorCode);
        expect(e.message).toMatch(/^(the request body|body member \S+|(path|query) parameter \S+|the request's (path|query) parameters) /);
        expect(e.message).not.toMatch(/\n/);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('any JSON body to a route that takes one', () => {
  let sidecar: Sidecar;
  beforeAll(async () => {
    const res = join(dir, 'resources');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(res, { recursive: true });
    await writeFile(join(res, 'mem.yaml'), 'apiVersion: rt.io/v1alpha1\nkind: Component\nmetadata:\n  name: mem\nspec:\n  type: state.in-memory\n  version: v1\n  metadata: []\n');
    sidecar = await startSidecar({ appId: 'schema-test', httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [res], logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    await sidecar?.close();
  });

  const routes = ['/v1.0/state/mem', '/v1.0/state/mem/bulk', '/v1.0/state/mem/transaction', '/v1.0-alpha1/state/mem/query', '/v1.0-alpha1/jobs/fuzz-job', '/v1.0/bindings/none', '/v1.0-alpha1/publish/bulk/none/t'];

  it('answers 2xx or a 4xx JSON error with a code, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), fc.oneof(anyValue.map((v) => JSON.stringify(v)), fc.string({ maxLength: 20 })), fc.constantFrom('application/json', 'text/plain', undefined), async (path, body, type) => {
        const res = await fetch(`http://127.0.0.1:${sidecar.httpPort}${path}`, { method: 'POST', body, headers: type ? { 'content-type': type } : {} });
        const text = await res.text();
        expect({ path, body, status: res.status < 500 }).toEqual({ path, body, status: true });
        if (res.status >= 400) {
          const err = JSON.parse(text) as { errorCode: string; message: string; statusCode?: unknown };
          expect(err.errorCode).toMatch(/^(ERR|RT)_[A-Z_]+$/);
          expect(typeof err.message).toBe('string');
          expect(err.statusCode).toBeUndefined();
        }
      }),
      { numRuns: 300 },
    );
  });
});
