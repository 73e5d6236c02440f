/**
 * The OpenAPI 3.1 document of the sidecar's HTTP API, made from the routes as they are
 * registered (an onRoute hook) and the schemas they declare (schema.ts), served at
 * `GET /v1.0/openapi.json` and kept in docs/openapi.json (scripts/openapi.ts writes it; a test
 * checks it is current and that every registered route is in it).
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { JsonSchema, RouteSchema } from './schema.ts';

export interface RegisteredRoute {
  methods: string[];
  url: string;
  schema?: RouteSchema;
}

/** The methods an OpenAPI path item can hold. */
const DOC_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const recorded = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Records every route registered on `app` (and its child scopes) from now on. */
export function recordRoutes(app: FastifyInstance): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  recorded.set(app, routes);
  app.addHook('onRoute', (r: RouteOptions) => {
    routes.push({ methods: (Array.isArray(r.method) ? r.method : [r.method]).map((m) => m.toLowerCase()), url: r.url, schema: r.schema as RouteSchema | undefined });
  });
  return routes;
}

/** The routes recorded on `app` (tests check their schemas). */
export function routesOf(app: FastifyInstance): RegisteredRoute[] {
  return recorded.get(app) ?? [];
}

const ERROR_BODY: JsonSchema = {
  type: 'object',
  required: ['errorCode', 'message'],
  properties: {
    errorCode: { type: 'string', description: 'ERR_MALFORMED_REQUEST, ERR_STATE_*, ERR_BINDING_*, RT_SCHEDULER_*, … (sidecar/src/api/errors.ts)' },
    message: { type: 'string' },
    details: { type: 'array', description: 'the last one is a google.rpc.ErrorInfo whose reason is the errorCode' },
  },
};

export function openApiDocument(routes: RegisteredRoute[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const gets = new Set(routes.filter((r) => r.methods.includes('get')).map((r) => r.url));
  for (const r of routes) {
    const path = docPath(r.url, r.schema?.params);
    for (const method of r.methods) {
      // a GET route's HEAD route is fastify's own (exposeHeadRoutes)
      if (!DOC_METHODS.includes(method) || (method === 'head' && gets.has(r.url) && r.methods.length === 1)) continue;
      (paths[path] ??= {})[method] = operation(r.schema);
    }
  }
  const sorted = Object.fromEntries(Object.keys(paths).sort().map((p) => [p, paths[p]]));
  return {
    openapi: '3.1.0',
    info: { title: 'rt sidecar HTTP API', version, description: 'The HTTP API of the rt sidecar. Errors are JSON {"errorCode","message","details"}; a request that does not match its schema answers 400 ERR_MALFORMED_REQUEST (or the field\'s own code).' },
    paths: sorted,
    components: {
      schemas: { Error: ERROR_BODY },
      responses: { Error: { description: 'an error: 4xx for a request to change, 5xx for a failure of the sidecar or a component', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
    },
  };
}

/** `/v1.0/state/:storename` → `/v1.0/state/{storename}`; `*` → the name its schema gives it. */
export function docPath(url: string, params: JsonSchema | undefined): string {
  const star = ((params?.properties as Record<string, JsonSchema> | undefined)?.['*']?.['x-name'] as string | undefined) ?? 'path';
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, `{${star}}`);
}

function operation(schema: RouteSchema | undefined): Record<string, unknown> {
  const errors = { $ref: '#/components/responses/Error' };
  if (!schema) return { summary: 'no schema declared yet', responses: { default: errors } };
  const parameters: Record<string, unknown>[] = [];
  for (const [name, s] of Object.entries((schema.params?.properties ?? {}) as Record<string, JsonSchema>)) {
    const docName = name === '*' ? ((s['x-name'] as string | undefined) ?? 'path') : name;
    parameters.push({ name: docName, in: 'path', required: true, description: s.description, schema: { type: 'string' } });
  }
  const query = schema.querystring ?? {};
  for (const [name, s] of Object.entries((query.properties ?? {}) as Record<string, JsonSchema>)) {
    parameters.push({ name, in: 'query', required: ((query.required as string[] | undefined) ?? []).includes(name), schema: clean(s) });
  }
  if (query.patternProperties) {
    parameters.push({ name: 'metadata.*', in: 'query', required: false, description: 'any number of metadata.<name>=<value> parameters: request metadata, passed to the component', schema: { type: 'string' } });
  }
  for (const [name, description] of Object.entries(schema['x-headers'] ?? {})) parameters.push({ name, in: 'header', required: false, description, schema: { type: 'string' } });
  const out: Record<string, unknown> = { summary: schema.summary };
  if (schema.description) out.description = schema.description;
  if (schema.tags) out.tags = schema.tags;
  if (parameters.length) out.parameters = parameters;
  const body = schema.body ?? schema['x-body'];
  if (body) {
    const anyContent = !schema.body && body.$id === undefined;
    out.requestBody = { required: true, content: { [anyContent ? '*/*' : 'application/json']: { schema: clean(body) } } };
  }
  const responses: Record<string, unknown> = {};
  for (const [status, description] of Object.entries(schema['x-responses'])) responses[status] = { description };
  responses.default = errors;
  out.responses = responses;
  return out;
}

/** A schema as the document shows it: without the `$id` that names its compiled validator. */
function clean(s: JsonSchema): JsonSchema {
  const { $id: _id, ...rest } = s;
  return rest;
}
