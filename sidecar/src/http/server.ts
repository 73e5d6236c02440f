/**
 * The sidecar's HTTP API server (fastify): JSON errors for everything, API token check,
 * request logging with pino, raw-body scopes for endpoints that take "any content".
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import { answerClientError } from './client-error.ts';
import { ApiError, errorBody } from './errors.ts';
import { SERVED_BLOCKS, unimplementedBlock } from './unimplemented.ts';
import { tokenMatches } from '../../../shared/token.ts';
import { REQUEST_TIMEOUT_MS, decodeContentEncoding, useDepthLimitedJson } from './body.ts';
import { openApiDocument, recordRoutes } from './openapi.ts';
import { OPENAPI } from './route-schemas.ts';
import { validatorCompiler } from './schema.ts';
import { RUNTIME_VERSION } from '../version.ts';

export interface HttpServerOptions {
  log: Logger;
  apiToken?: string;
  bodyLimit: number;
  /** Longest time a request may take to arrive (headers and body); default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
}

/** Paths that answer without the API token (probes must work without secrets). */
const OPEN_PATHS = new Set(['/v1.0/healthz', '/v1.0/healthz/outbound']);

const require = createRequire(import.meta.url);

/** A fastify schema compiler factory that loads its package the first time a schema is compiled. */
function lazyCompiler<Factory>(load: () => unknown): Factory {
  let factory: ((...args: unknown[]) => unknown) | undefined;
  const lazy = (...args: unknown[]) => (factory ??= (load() as () => (...args: unknown[]) => unknown)())(...args);
  return lazy as Factory;
}

export function createHttpServer(opts: HttpServerOptions): FastifyInstance {
  const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const app = Fastify({
    loggerInstance: opts.log as FastifyBaseLogger,
    // request lines at debug from our own hook instead of fastify's two info lines
    logController: new LogController({ disableRequestLogging: true }),
    // a child logger (with its reqId) per request costs a few % of a proxied call's CPU: only
    // when request lines are logged at all (debug); otherwise req.log is the server's logger
    childLoggerFactory: (logger, bindings, childOpts) => (opts.log.isLevelEnabled('debug') ? logger.child(bindings, childOpts) : logger),
    bodyLimit: opts.bodyLimit,
    // a declared body that never arrives gets 408 instead of holding its connection; node
    // ignores requestTimeout while headersTimeout is longer, and checks both every second
    requestTimeout,
    http: { requestTimeout, headersTimeout: requestTimeout, connectionsCheckingInterval: Math.min(1000, requestTimeout) },
    // keys, names and ids may hold characters fastify would otherwise reject
    routerOptions: { maxParamLength: 4096, ignoreDuplicateSlashes: false },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // routes validate with schema.ts's compiler and declare no response schemas: fastify's default
    // compilers (ajv, fast-json-stringify) would still be built for every server at start (~10%
    // of it); these load them on first use, which never comes
    schemaController: { compilersFactory: { buildValidator: lazyCompiler(() => require('@fastify/ajv-compiler')), buildSerializer: lazyCompiler(() => require('@fastify/fast-json-stringify-compiler')) } },
    // requests Node's parser refuses (a method outside its list, a malformed header, a body that
    // never arrives) get our shape too, and a debug line
    clientErrorHandler: answerClientError(opts.log),
    // errors fastify raises before routing (bad percent-encoding, over-long segments) get our shape too
    frameworkErrors: (err: FastifyError, _req: FastifyRequest, reply: FastifyReply) => {
      const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
      void reply.status(status).type('application/json').send(errorBody('ERR_MALFORMED_REQUEST', err.message));
    },
  });

  if (opts.apiToken) {
    const token = opts.apiToken;
    app.addHook('onRequest', async (req: FastifyRequest) => {
      if (OPEN_PATHS.has(req.url.split('?')[0])) return;
      const refused = tokenRefusal(req.headers, token);
      if (refused) throw refused;
    });
  }

  // callback style and a level check first: no promise nor object per request unless it is logged
  app.addHook('onResponse', (req, reply, done) => {
    if (opts.log.isLevelEnabled('debug')) req.log.debug({ method: req.method, url: req.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    done();
  });

  rawOptions.set(app as unknown as FastifyInstance, { ...opts });

  // every route's schema is validated with the validators of schema.ts (compiled at build time);
  // the routes registered from now on make the OpenAPI document
  app.setValidatorCompiler(validatorCompiler);
  const routes = recordRoutes(app as unknown as FastifyInstance);
  let openapi: string | undefined;
  app.get('/v1.0/openapi.json', { schema: OPENAPI }, async (_req, reply) => {
    openapi ??= JSON.stringify(openApiDocument(routes, RUNTIME_VERSION));
    return reply.type('application/json').send(openapi);
  });

  app.setErrorHandler((err: FastifyError | ApiError | Error, req: FastifyRequest, reply: FastifyReply) => {
    const body = toErrorBody(err);
    logError(req.log, err, body, req.url);
    reply.status(body.status).type('application/json').send(errorBody(body.errorCode, body.message, body.details));
  });

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0];
    // a building block of the ecosystem that rt does not have: 501 naming it, not a bare 404
    const block = unimplementedBlock(path);
    if (block) return reply.status(501).send(errorBody('ERR_API_UNIMPLEMENTED', `${req.method} ${path}: rt has no ${block} building block; this sidecar serves ${SERVED_BLOCKS}`));
    return reply.status(404).send(errorBody('ERR_NOT_FOUND', `no API route for ${req.method} ${path}`));
  });

  // Bodies that are not JSON reach handlers as Buffers; JSON parse errors become 400 JSON errors.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  useDepthLimitedJson(app as unknown as FastifyInstance);
  app.addHook('preParsing', decodeContentEncoding);

  return app as unknown as FastifyInstance;
}

/** The 401 for a request without the API token (or with another), else undefined. */
function tokenRefusal(headers: IncomingHttpHeaders, token: string): ApiError | undefined {
  const sent = headers['rt-api-token'] ?? headers['dapr-api-token'];
  if (typeof sent === 'string' && tokenMatches(sent, token)) return undefined;
  return new ApiError(401, 'ERR_UNAUTHORIZED', 'missing or invalid API token: send it in the rt-api-token header');
}

const rawOptions = new WeakMap<FastifyInstance, HttpServerOptions & { rawRequestHook?: RawRequestHook }>();

/** Runs first for each request a raw route serves (the tracing block's span; set only when tracing is on). */
export type RawRequestHook = (req: IncomingMessage, res: ServerResponse) => void;

export function setRawRequestHook(app: FastifyInstance, hook: RawRequestHook): void {
  const opts = rawOptions.get(app);
  if (!opts) throw new Error('setRawRequestHook needs a server made by createHttpServer');
  opts.rawRequestHook = hook;
}

/** A request handler of raw node:http; what it throws (before answering) becomes the API's JSON error. */
export type RawHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** The body limit of the server a raw route is on (createHttpServer's bodyLimit). */
export function rawBodyLimit(app: FastifyInstance): number {
  const opts = rawOptions.get(app);
  if (!opts) throw new Error('rawBodyLimit needs a server made by createHttpServer');
  return opts.bodyLimit;
}

/**
 * Serves the paths under `prefix` (or those a RegExp matches) with `handle` ahead of fastify's routing, for a hot proxying
 * path where fastify's per-request objects, hooks and reply machinery showed in the profile
 * (service invocation, bench/invoke.bench.ts). Kept as fastify would: the API token, 503 while
 * closing, errors as the API's JSON, request lines at debug. The node server's own limits
 * (request and headers timeouts) hold as for any request. Requests fastify is handed directly
 * (inject) still take its routes, so `prefix` must have a fastify route doing the same.
 */
export function rawRoute(app: FastifyInstance, prefix: string | RegExp, handle: RawHandler): void {
  const opts = rawOptions.get(app);
  if (!opts) throw new Error('rawRoute needs a server made by createHttpServer');
  const server = app.server;
  const [fastifyHandler] = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  const fail = (req: IncomingMessage, res: ServerResponse, err: unknown) => {
    const body = toErrorBody(err);
    logError(opts.log, err, body, req.url);
    if (res.headersSent) return void res.destroy();
    res.writeHead(body.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(errorBody(body.errorCode, body.message, body.details)));
  };
  server.removeListener('request', fastifyHandler);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url || (typeof prefix === 'string' ? !req.url.startsWith(prefix) : !prefix.test(req.url))) return fastifyHandler(req, res);
    if (opts.log.isLevelEnabled('debug')) {
      const started = performance.now();
      res.once('finish', () => opts.log.debug({ method: req.method, url: req.url, status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request'));
    }
    if (opts.rawRequestHook) opts.rawRequestHook(req, res);
    if (closing) {
      res.setHeader('connection', 'close');
      return fail(req, res, new ApiError(503, 'ERR_UNAVAILABLE', 'the sidecar is shutting down'));
    }
    const refused = opts.apiToken ? tokenRefusal(req.headers, opts.apiToken) : undefined;
    if (refused) return fail(req, res, refused);
    try {
      handle(req, res).catch((e: unknown) => fail(req, res, e));
    } catch (e) {
      fail(req, res, e); // thrown before the handler's first await
    }
  });
}

/** An ApiError is an answer we chose (e.g. the contract's 500 for a missing job): no stack trace. */
function logError(log: FastifyBaseLogger | Logger, err: unknown, body: { status: number; errorCode: string; message: string }, url: string | undefined): void {
  if (body.status >= 500 && !(err instanceof ApiError)) log.error({ err, url }, body.message);
  else if (body.status >= 500) log.warn({ url, errorCode: body.errorCode }, body.message);
  else log.debug({ url, errorCode: body.errorCode }, body.message);
}

/** Maps anything thrown in a handler to status + error body; framework 4xx stay 4xx. */
export function toErrorBody(err: unknown): { status: number; errorCode: string; message: string; details: unknown[] } {
  if (err instanceof ApiError) return { status: err.status, errorCode: err.errorCode, message: err.message, details: err.details };
  const fe = err as Partial<FastifyError>;
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = status === 413 ? 'ERR_REQUEST_TOO_LARGE' : status === 415 ? 'ERR_UNSUPPORTED_MEDIA_TYPE' : 'ERR_MALFORMED_REQUEST';
    return { status, errorCode: code, message: fe.message ?? 'malformed request', details: [] };
  }
  return { status: 500, errorCode: 'ERR_INTERNAL', message: fe.message ?? String(err), details: [] };
}

/**
 * Registers routes whose bodies must reach the handler untouched (as a Buffer, whatever the
 * content type), e.g. workflow input and raised events, metadata attribute values.
 */
export async function rawBodyRoutes(app: FastifyInstance, register: (scope: FastifyInstance) => void | Promise<void>): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    await register(scope);
  });
}
