/**
 * The OpenAPI document (sidecar/src/http/openapi.ts): every route a real sidecar registers is in
 * the one it serves at GET /v1.0/openapi.json (read back from fastify's own route tree, not from
 * the hook that makes the document), docs/openapi.json is that document, and every route
 * declares its schema (path parameters, query, body), each listed for the build's validators.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routesOf } from '../../sidecar/src/http/openapi.ts';
import { validatedSchemas } from '../../sidecar/src/http/route-schemas.ts';
import { startSidecar, type Sidecar } from '../../sidecar/src/sidecar.ts';
import { OPENAPI_COPY, servedOpenApi } from '../../scripts/openapi.ts';

interface Operation {
  summary: string;
  parameters?: { name: string; in: string }[];
  requestBody?: unknown;
}
interface Doc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
}

const DOC_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** `/v1.0/state/{storename}`, `/v1.0/state/:storename`, `/v1.0/jobs/*` → one form: every parameter `:`. */
const normal = (path: string) => path.replace(/\{[^}]+\}/g, ':').replace(/:[A-Za-z0-9_]+(\|:[A-Za-z0-9_]+)*/g, ':').replace(/\*$/, ':');

/** fastify's route tree (printRoutes: one node per line, children indented by 4) → [method, path] pairs. */
function registeredRoutes(tree: string): [string, string][] {
  const out: [string, string][] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│├└─\s]*)(.*?)(?: \(([A-Z, ]+)\))?$/u.exec(line);
    if (!m || !m[2]) continue;
    const depth = [...m[1]].length / 4;
    stack.length = depth;
    stack[depth - 1] = m[2];
    if (m[3]) for (const method of m[3].split(', ')) out.push([method.toLowerCase(), stack.join('')]);
  }
  return out;
}

let dir: string;
let sidecar: Sidecar;
let doc: Doc;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-openapi-test-'));
  sidecar = await startSidecar({ appId: 'openapi-test', httpPort: 0, grpcPort: 0, enableMetrics: false, dataDir: join(dir, 'data'), resourcesPaths: [], logger: pino({ level: 'silent' }) });
  const res = await fetch(`http://127.0.0.1:${sidecar.httpPort}/v1.0/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/application\/json/);
  doc = (await res.json()) as Doc;
});
afterAll(async () => {
  await sidecar?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('GET /v1.0/openapi.json', () => {
  it('holds every route the sidecar registered, and only those', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = new Map<string, Set<string>>();
    for (const [path, ops] of Object.entries(doc.paths)) documented.set(normal(path), new Set(Object.keys(ops)));
    const registered = registeredRoutes(sidecar.ctx.http.printRoutes()).filter(([method]) => DOC_METHODS.includes(method));
    expect(registered.length).toBeGreaterThan(40);
    const missing = registered.filter(([method, path]) => {
      const ops = documented.get(normal(path));
      // fastify answers HEAD for every GET route on its own
      return !ops || !(ops.has(method) || (method === 'head' && ops.has('get')));
    });
    expect(missing).toEqual([]);
    const routed = new Set(registered.map(([method, path]) => `${method} ${normal(path)}`));
    const unrouted = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).filter((m) => !routed.has(`${m} ${normal(path)}`)).map((m) => `${m} ${path}`));
    expect(unrouted).toEqual([]);
  });

  it('is what docs/openapi.json holds (node scripts/openapi.ts writes it)', async () => {
    expect(readFileSync(OPENAPI_COPY, 'utf8'), 'docs/openapi.json is not current: run node scripts/openapi.ts').toBe(await servedOpenApi());
  });

  it("declares every route's path parameters, query and body, from schemas the build compiles", () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.summary, where).not.toBe('no schema declared yet');
        const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        expect((op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name), where).toEqual(inPath);
        if (method === 'post' || method === 'put') expect(op.requestBody, where).toBeDefined();
      }
    }
    // each part a route validates is one the build compiles (images/validators.ts): the same object
    const compiled = new Set(validatedSchemas());
    for (const r of routesOf(sidecar.ctx.http)) {
      const declared = { route: r.url, schema: !!r.schema, query: !!r.schema?.querystring, params: /[:*]/.test(r.url) ? !!r.schema?.params : true };
      expect(declared).toEqual({ route: r.url, schema: true, query: true, params: true });
      for (const part of [r.schema?.params, r.schema?.querystring, r.schema?.body, r.schema?.['x-body']]) {
        if (part && typeof part.$id === 'string') expect({ route: r.url, id: part.$id, compiled: compiled.has(part) }).toEqual({ route: r.url, id: part.$id, compiled: true });
      }
    }
  });
});
