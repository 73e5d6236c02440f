/**
 * The HTTP routes' schemas and the one place requests are validated against them.
 *
 * Every route declares `schema: { summary, params, querystring, body }` (JSON Schema, draft-07;
 * each part has an `$id`). fastify validates params, query and a parsed JSON body with the
 * validator `validatorCompiler` gives; a route that reads its body itself (bindings, bulk
 * publish) declares it as `x-body` and calls `checkBody` once it is parsed. Every failure is a
 * 400 `{"errorCode","message"}`: the code is ERR_MALFORMED_REQUEST, or the `x-error-code` of the
 * schema node nearest to what failed (e.g. RT_SCHEDULER_SCHEDULE_INVALID for a job's
 * `schedule`); the message names the member and what it must be (`schemaError`).
 *
 * The validators are compiled at build time: images/bundle.ts puts ajv's standalone code for
 * every schema of route-schemas.ts in place of precompiled.ts, so a built sidecar never loads
 * ajv. Run from the sources, a schema is compiled with ajv the first time a request needs it.
 * The same schemas make the OpenAPI document (openapi.ts).
 */
import { createRequire } from 'node:module';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseJsonText } from './body.ts';
import { ApiError, malformed } from './errors.ts';
import { PRECOMPILED } from './precompiled.ts';

export type JsonSchema = { [key: string]: unknown };

/** A route's `schema`: what fastify validates, plus what the OpenAPI document shows. */
export interface RouteSchema {
  summary: string;
  description?: string;
  tags?: string[];
  params?: JsonSchema;
  querystring?: JsonSchema;
  /** A JSON body fastify validates (routes.ts parses other content types to JSON first). */
  body?: JsonSchema;
  /** A body the route reads itself: `checkBody` validates it once parsed; `{}` for any content. */
  'x-body'?: JsonSchema;
  /** Header parameters, for the document (fastify does not validate them). */
  'x-headers'?: Record<string, string>;
  /** Success status → what it means. */
  'x-responses': Record<string, string>;
}

/** ajv's options, the same at build time (images/validators.ts) and at run time from the sources. */
export const AJV_OPTIONS = {
  allErrors: false,
  allowUnionTypes: true,
  coerceTypes: false,
  useDefaults: false,
  removeAdditional: false,
  strict: true,
  code: { source: true, esm: true, lines: false },
} as const;

/** Vendor keywords the schemas carry (ajv's strict mode refuses unknown ones). */
export const VENDOR_KEYWORDS = ['x-error-code', 'x-name'];

interface AjvError {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

export interface ValidateFunction {
  (data: unknown): boolean;
  errors?: AjvError[] | null;
}

/** The export name of a schema's validator in the precompiled module. */
export function validatorName(id: string): string {
  return id.replace(/^rt:/, '').replace(/[^A-Za-z0-9_$]/g, '_');
}

const require = createRequire(import.meta.url);
let ajv: { compile(schema: JsonSchema): ValidateFunction } | undefined;

/** A new ajv with the options and keywords of the build (images/validators.ts uses it too). */
export function newAjv(): { compile(schema: JsonSchema): ValidateFunction; addSchema(schema: JsonSchema): unknown } {
  const Ajv = (require('ajv') as { default: new (opts: object) => { compile(schema: JsonSchema): ValidateFunction; addSchema(schema: JsonSchema): unknown; addKeyword(k: string): unknown } }).default;
  const instance = new Ajv(AJV_OPTIONS);
  for (const k of VENDOR_KEYWORDS) instance.addKeyword(k);
  return instance;
}

const compiled = new Map<string, ValidateFunction>();

/** The validator of a schema: the build's, else compiled now (sources), once per `$id`. */
export function validatorOf(schema: JsonSchema): ValidateFunction {
  const id = schema.$id;
  if (typeof id !== 'string') throw new Error(`a route schema needs an $id: ${JSON.stringify(schema).slice(0, 200)}`);
  let fn = compiled.get(id) ?? (PRECOMPILED?.[validatorName(id)] as ValidateFunction | undefined);
  if (!fn) {
    if (PRECOMPILED) throw new Error(`schema ${id} is not in the build's validators: list it in sidecar/src/http/route-schemas.ts`);
    fn = (ajv ??= newAjv()).compile(schema);
  }
  compiled.set(id, fn);
  return fn;
}

export type HttpPart = 'params' | 'querystring' | 'body' | 'headers';

/**
 * fastify's validator compiler, called for each part of each route when the server gets ready:
 * the build's validator, or (from the sources) one compiled with ajv when the first request
 * needs it. A schema without an `$id`, or one the build did not compile, stops the start. A
 * failure answers `{ error }` with the 400.
 */
export function validatorCompiler({ schema, httpPart, method, url }: { schema: JsonSchema; httpPart?: string; method?: string | string[]; url?: string }): (data: unknown) => true | { error: ApiError } {
  const part = (httpPart ?? 'body') as HttpPart;
  if (typeof schema.$id !== 'string' || (PRECOMPILED && !PRECOMPILED[validatorName(schema.$id)])) {
    throw new Error(`${String(method)} ${url}: its ${part} schema needs an $id and a place in sidecar/src/http/route-schemas.ts, so that the build compiles its validator`);
  }
  // a query or path that may hold anything (fastify always gives those parts as objects) needs no
  // validator: from the sources, ajv then loads with the first request that checks something
  if ((part === 'querystring' || part === 'params') && Object.keys(schema).every((k) => k === '$id' || k === 'description' || (k === 'type' && schema.type === 'object'))) return () => true;
  let fn: ValidateFunction | undefined = PRECOMPILED?.[validatorName(schema.$id)];
  return (data) => {
    fn ??= validatorOf(schema);
    return fn(data) ? true : { error: schemaError(schema, part, fn.errors ?? [], data) };
  };
}

/** Validates a body a route parsed itself against its `x-body` schema; throws the 400. */
export function checkBody(schema: JsonSchema, value: unknown): void {
  const fn = validatorOf(schema);
  if (!fn(value)) throw schemaError(schema, 'body', fn.errors ?? [], value);
}

/**
 * preValidation hook of a route whose JSON body may come with any content type (clients of the
 * ecosystem's API send none, or text/plain): bytes or text become the JSON value (blank: none),
 * so that the body schema checks it.
 */
export function jsonOfAnyContentType(req: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const b = req.body;
  if (Buffer.isBuffer(b) || typeof b === 'string') {
    const text = b.toString();
    try {
      req.body = text.trim() === '' ? undefined : parseJsonText(text);
    } catch (e) {
      done(e as Error);
      return;
    }
  }
  done();
}

const ARTICLE: Record<string, string> = { string: 'a string', object: 'an object', array: 'an array', integer: 'a whole number', number: 'a number', boolean: 'true or false', null: 'null' };

/** The 400 for the first error ajv found: the member, what it must be, the code of its schema node. */
export function schemaError(schema: JsonSchema, part: HttpPart, errors: AjvError[], data: unknown): ApiError {
  const e = errors[0];
  if (!e) return malformed(`the request ${part} is not valid`);
  if (part === 'body' && (data === null || data === undefined) && e.instancePath === '') {
    return withCode(schema, e, `the request body is empty${hint(schema)}`);
  }
  const path = memberPath(e);
  const kind = part === 'querystring' ? 'query' : part === 'params' ? 'path' : part === 'headers' ? 'header' : 'body';
  const where = kind === 'body' ? (path ? `body member ${path}` : 'the request body') : path ? `${kind} parameter ${path}` : `the request's ${kind} parameters`;
  return withCode(schema, e, `${where} ${what(e)}${e.instancePath === '' && e.keyword !== 'required' ? hint(schema) : ''}`);
}

function withCode(schema: JsonSchema, e: AjvError, message: string): ApiError {
  const code = codeAt(schema, e.schemaPath);
  return code ? new ApiError(400, code, message) : malformed(message);
}

/** `operations[0].request.key`, from ajv's `/operations/0/request/key` (and the missing member of `required`). */
function memberPath(e: AjvError): string {
  const steps = e.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (e.keyword === 'required' && typeof e.params.missingProperty === 'string') steps.push(e.params.missingProperty);
  let out = '';
  for (const s of steps) out += /^\d+$/.test(s) ? `[${s}]` : out ? `.${s}` : s;
  return out;
}

function what(e: AjvError): string {
  switch (e.keyword) {
    case 'required':
      return 'is required';
    case 'type': {
      const types = String(e.params.type).split(',');
      return `must be ${types.map((t) => ARTICLE[t] ?? t).join(' or ')}`;
    }
    case 'enum':
      return `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'minLength':
      return e.params.limit === 1 ? 'must not be empty' : `must be at least ${String(e.params.limit)} characters long`;
    case 'minimum':
      return `must be ${String(e.params.limit)} or more`;
    case 'maximum':
      return `must be ${String(e.params.limit)} or less`;
    default:
      return e.message ?? `is not valid (${e.keyword})`;
  }
}

/** The root schema's description, as a hint of what to send. */
function hint(schema: JsonSchema): string {
  return typeof schema.description === 'string' ? `: ${schema.description}` : '';
}

/** The `x-error-code` of the deepest schema node on the failing path, if any. */
function codeAt(schema: JsonSchema, schemaPath: string): string | undefined {
  let node: unknown = schema;
  let code = typeof schema['x-error-code'] === 'string' ? schema['x-error-code'] : undefined;
  for (const step of schemaPath.replace(/^#\/?/, '').split('/')) {
    if (typeof node !== 'object' || node === null) break;
    node = (node as Record<string, unknown>)[decodeURIComponent(step).replace(/~1/g, '/').replace(/~0/g, '~')];
    const c = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)['x-error-code'] : undefined;
    if (typeof c === 'string') code = c;
  }
  return code;
}

// ------------------------------------------------------------------ builders

/** A string-valued map (metadata); null counts as none. */
export const STRING_MAP: JsonSchema = { type: ['object', 'null'], additionalProperties: { type: 'string' } };

/** `metadata.<name>` query parameters: a string each (repeated: the last one counts, http/query.ts). */
export const METADATA_QUERY: JsonSchema = {
  '^metadata\\.': { type: ['string', 'array'], items: { type: 'string' }, description: 'request metadata, passed to the component' },
};

/** Path parameters, all strings; `*:name` is the rest of the path (`x-name` names it in the document). */
function pathParams(id: string, names: Record<string, string>): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  for (const [name, description] of Object.entries(names)) {
    const [key, docName] = name.startsWith('*') ? ['*', name.slice(2) || 'path'] : [name, undefined];
    properties[key] = { type: 'string', description, ...(docName ? { 'x-name': docName } : {}) };
  }
  return { $id: `rt:${id}.params`, type: 'object', properties, required: Object.keys(properties) };
}

export interface RouteSpec {
  /** Path parameter → what it is (`*:name` for the rest of the path). */
  params?: Record<string, string>;
  /** Query parameters (strings unless said otherwise). */
  query?: Record<string, JsonSchema>;
  /** Takes `metadata.<name>` query parameters. */
  metadata?: boolean;
  /** A JSON body, checked by fastify. */
  body?: JsonSchema;
  /** A JSON body the route reads itself and checks with checkBody. */
  ownBody?: JsonSchema;
  /** Any content, passed on as sent: what it is. */
  anyBody?: string;
  headers?: Record<string, string>;
  responses: Record<string, string>;
}

/** A route's schema; `id` (`<block>.<operation>`) names its parts' `$id`s and its tag. */
export function route(id: string, summary: string, spec: RouteSpec): RouteSchema {
  const out: RouteSchema = { summary, tags: [id.split('.')[0]!], 'x-responses': spec.responses };
  if (spec.params) out.params = pathParams(id, spec.params);
  const query: JsonSchema = { $id: `rt:${id}.query`, type: 'object' };
  if (spec.query) query.properties = spec.query;
  if (spec.metadata) query.patternProperties = METADATA_QUERY;
  out.querystring = query;
  if (spec.body) out.body = { $id: `rt:${id}.body`, ...spec.body };
  if (spec.ownBody) out['x-body'] = { $id: `rt:${id}.body`, ...spec.ownBody };
  if (spec.anyBody) out['x-body'] = { description: spec.anyBody };
  if (spec.headers) out['x-headers'] = spec.headers;
  return out;
}
