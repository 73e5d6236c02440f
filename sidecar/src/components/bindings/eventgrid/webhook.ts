/**
 * Input side: the webhook server on `handshakePort` that the event-routing service calls.
 *
 *   OPTIONS  CloudEvents webhook validation handshake: 200 + WebHook-Allowed-Origin/Rate.
 *   POST     a CloudEvent (application/cloudevents+json) or a batch
 *            (application/cloudevents-batch+json), with a bearer JWT from the tenant.
 *            Each event goes to the app (POST /<binding-name>), in order.
 *
 * Answers follow the service's retry rules: 401/400/413/415 are final (no retry); when the
 * app fails or keys cannot be loaded the answer is 5xx, so the service delivers again later.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { answerClientError } from '../../../http/client-error.ts';
import type { InputBindingEvent, InputBindingReply } from '../../types.ts';
import type { TokenValidator } from './jwt.ts';

export interface WebhookOptions {
  port: number;
  host: string;
  validator: TokenValidator;
  /** Delivers one event to the app; throws when the app cannot be reached. */
  deliver(event: InputBindingEvent): Promise<InputBindingReply>;
  log: Logger;
  maxBodyBytes?: number;
}

/** The service sends at most 1 MB per delivery; leave room, refuse what is clearly not one. */
const DEFAULT_MAX_BODY = 4 * 1024 * 1024;
const CE_JSON = 'application/cloudevents+json';
const CE_BATCH = 'application/cloudevents-batch+json';
const REQUIRED = ['specversion', 'id', 'source', 'type'] as const;

export class WebhookServer {
  private readonly opts: WebhookOptions;
  private server?: Server;

  constructor(opts: WebhookOptions) {
    this.opts = opts;
  }

  /** Listens; resolves with the bound port. */
  async start(): Promise<number> {
    const server = createServer({ requestTimeout: 120_000, headersTimeout: 30_000, keepAliveTimeout: 65_000 }, (req, res) => {
      this.handle(req, res).catch((e) => {
        this.opts.log.error({ err: e }, 'webhook request failed');
        if (!res.headersSent) send(res, 500, 'ERR_INTERNAL', 'internal error while handling the delivery');
        else res.destroy();
      });
    });
    // what Node's parser refuses (an unknown method, a malformed header) in the same JSON shape
    server.on('clientError', answerClientError(this.opts.log));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    return (server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeIdleConnections();
      // deliveries still running get a moment, then their connections are cut
      setTimeout(() => s.closeAllConnections(), 2000).unref();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'OPTIONS') return this.handshake(req, res);
    if (req.method !== 'POST') {
      req.resume();
      res.setHeader('allow', 'OPTIONS, POST');
      return send(res, 405, 'ERR_METHOD_NOT_ALLOWED', `method ${req.method} is not allowed; the webhook takes OPTIONS (handshake) and POST (events)`);
    }

    // authenticate before reading the body
    const check = await this.opts.validator.check(req.headers.authorization);
    if (!check.ok) {
      req.resume();
      if (check.unavailable) {
        this.opts.log.warn({ reason: check.reason }, 'webhook delivery could not be authenticated now; asking the sender to retry');
        res.setHeader('retry-after', '10');
        return send(res, 503, 'ERR_WEBHOOK_AUTH_UNAVAILABLE', check.reason);
      }
      this.opts.log.warn({ reason: check.reason }, 'webhook delivery rejected: bearer token not accepted');
      res.setHeader('www-authenticate', `Bearer error="invalid_token", error_description="${check.reason.replace(/"/g, "'")}"`);
      return send(res, 401, 'ERR_WEBHOOK_UNAUTHORIZED', `bearer token rejected: ${check.reason}`);
    }

    const contentType = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (contentType !== CE_JSON && contentType !== CE_BATCH && contentType !== 'application/json') {
      req.resume();
      return send(res, 415, 'ERR_WEBHOOK_UNSUPPORTED_MEDIA_TYPE', `content-type "${contentType.slice(0, 100)}" is not accepted; send ${CE_JSON} or ${CE_BATCH}`);
    }
    const body = await readBody(req, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY);
    if (body === 'too-large') return send(res, 413, 'ERR_WEBHOOK_BODY_TOO_LARGE', `the delivery is larger than ${this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY} bytes`, true);
    if (body === 'aborted') return;

    const parsed = parseEvents(body, contentType);
    if (typeof parsed === 'string') return send(res, 400, 'ERR_MALFORMED_REQUEST', parsed);

    for (let i = 0; i < parsed.length; i++) {
      const ev = parsed[i];
      let reply: InputBindingReply;
      try {
        reply = await this.opts.deliver({ data: ev.bytes, contentType: CE_JSON, metadata: ev.metadata });
      } catch (e) {
        this.opts.log.warn({ err: (e as Error).message, event: ev.metadata['ce-id'] }, 'app unreachable for an input-binding event');
        return send(res, 503, 'ERR_INPUT_BINDING_APP_UNAVAILABLE', `the app could not be reached for event ${i + 1} of ${parsed.length}; deliver again later`);
      }
      if (reply.status < 200 || reply.status >= 300) {
        this.opts.log.warn({ status: reply.status, event: ev.metadata['ce-id'] }, 'app failed an input-binding event');
        return send(res, 500, 'ERR_INPUT_BINDING_APP_FAILED', `the app answered ${reply.status} for event ${i + 1} of ${parsed.length}; deliver again later`);
      }
    }
    res.statusCode = 200;
    res.end();
  }

  /** CloudEvents HTTP webhook spec, section 4: abuse protection handshake. */
  private handshake(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const origin = req.headers['webhook-request-origin'];
    if (typeof origin !== 'string' || origin.trim() === '' || !/^[\x21-\x7e]+$/.test(origin.trim())) {
      return send(res, 400, 'ERR_MALFORMED_REQUEST', 'the validation handshake needs a WebHook-Request-Origin header');
    }
    res.statusCode = 200;
    res.setHeader('webhook-allowed-origin', origin.trim());
    res.setHeader('webhook-allowed-rate', '*');
    res.setHeader('allow', 'OPTIONS, POST');
    res.end();
  }
}

interface ParsedEvent {
  /** The event as JSON, exactly one event. */
  bytes: Buffer;
  metadata: Record<string, string>;
}

/** Parses a delivery into events; a string is the reason it is malformed. */
export function parseEvents(body: Buffer, contentType: string): ParsedEvent[] | string {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return 'the body is not valid JSON';
  }
  const batch = Array.isArray(value);
  if (contentType === CE_BATCH && !batch) return `a ${CE_BATCH} body must be a JSON array of CloudEvents`;
  if (contentType === CE_JSON && batch) return `a ${CE_JSON} body must be one CloudEvent; send arrays as ${CE_BATCH}`;
  const items = batch ? (value as unknown[]) : [value];
  if (items.length === 0) return 'the batch is empty';
  const out: ParsedEvent[] = [];
  for (let i = 0; i < items.length; i++) {
    const ev = items[i];
    const where = batch ? `event ${i + 1} of the batch` : 'the event';
    if (typeof ev !== 'object' || ev === null || Array.isArray(ev)) return `${where} is not a JSON object`;
    const o = ev as Record<string, unknown>;
    for (const k of REQUIRED) {
      if (typeof o[k] !== 'string' || o[k] === '') return `${where} lacks the CloudEvent attribute "${k}"`;
    }
    if (o.specversion !== '1.0') return `${where} has specversion "${String(o.specversion).slice(0, 20)}"; 1.0 is accepted`;
    const metadata: Record<string, string> = {
      'ce-id': header(o.id as string),
      'ce-source': header(o.source as string),
      'ce-type': header(o.type as string),
      'ce-specversion': '1.0',
    };
    if (typeof o.subject === 'string') metadata['ce-subject'] = header(o.subject);
    if (typeof o.time === 'string') metadata['ce-time'] = header(o.time);
    out.push({ bytes: batch || contentType !== CE_JSON ? Buffer.from(JSON.stringify(o)) : body, metadata });
  }
  return out;
}

/** Attribute values travel to the app as headers: keep them header-safe. */
function header(v: string): string {
  return v.replace(/[^\x20-\x7e]/g, '?').slice(0, 1024);
}

async function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large' | 'aborted'> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) {
    req.resume();
    return 'too-large';
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (c: Buffer) => {
      if (done) return;
      size += c.length;
      if (size > max) {
        done = true;
        resolve('too-large');
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!done) {
        done = true;
        resolve(Buffer.concat(chunks, size));
      }
    });
    req.on('error', () => {
      if (!done) {
        done = true;
        resolve('aborted');
      }
    });
    req.on('aborted', () => {
      if (!done) {
        done = true;
        resolve('aborted');
      }
    });
  });
}

function send(res: ServerResponse, status: number, errorCode: string, message: string, close = false): void {
  const body = JSON.stringify({ errorCode, message, details: [] });
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(body));
  if (close) res.setHeader('connection', 'close');
  res.end(body);
}
