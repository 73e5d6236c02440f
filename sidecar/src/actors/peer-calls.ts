/**
 * Actor calls between hosts: an operation that must run where the actor is active (a method
 * call, its state, its timers, a reminder's fire) goes to the host's sidecar on the internal
 * invocation port, over the invocation transport (invoke/internal-http.ts: keep-alive pools,
 * mutual TLS with the host's app checked when identity is on), marked `rt-invoke-actor` so the
 * host's sidecar hands it to its actor runtime instead of its app (invoke/internal-server.ts).
 *
 * The wire, one request per operation (segments percent-encoded):
 *   PUT    /<type>/<id>/method/<m>     the call's body; content-type and the reentrancy ids as headers
 *                                     → the app's status, content type and body as it gave them
 *   GET    /<type>/<id>/state/<key>    → 200 the value's bytes, 204 none
 *   POST   /<type>/<id>/state          [{operation, key, value (base64), metadata}] → 204
 *   PUT    /<type>/<id>/timers/<name>  the timer request (JSON) → 204
 *   DELETE /<type>/<id>/timers/<name>  → 204
 *   PUT    /<type>/<id>/remind/<name>  the reminder as stored (JSON) → 204, fired through the actor's turn
 * The host's refusals come back as its API errors (the same errorCode and status).
 */
import { Readable } from 'node:stream';
import type { AppResponse } from '../app/channel.ts';
import { ApiError, malformed } from '../http/errors.ts';
import type { InvokeAnswer } from '../invoke/call.ts';
import type { ActorCallHandler } from '../invoke/internal-actors.ts';
import { ACTOR_CALL, type HttpTransport } from '../invoke/internal-http.ts';
import type { Caller, Header, RequestHead } from '../invoke/proto.ts';
import { REENTRANCY_HEADERS } from './app-calls.ts';
import { HostUnreachable, type ActorPeers, type ActorStateOperation, type TimerRequest } from './calls.ts';
import type { ActorHost } from './placement/types.ts';
import type { StoredReminder } from './reminders.ts';
import type { ActorsService } from './service.ts';

/** Errors of a call that never left this sidecar: it may be sent again (elsewhere). */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOENT', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);
const HOP = { [ACTOR_CALL]: '1' };
/** The request headers a method call carries to its host: what the host's runtime reads. */
const CARRIED = new Set<string>(['content-type', ...REENTRANCY_HEADERS]);
/** A forwarded request's body, at most (the caller's sidecar checked --max-body-size already). */
const MAX_BODY = 256 * 1024 * 1024;

const seg = (s: string) => encodeURIComponent(s);
const actorPath = (type: string, id: string) => `/${seg(type)}/${seg(id)}`;

async function bytesOf(body: AsyncIterable<Buffer | Uint8Array | string>, limit = Number.POSITIVE_INFINITY): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    const b = Buffer.isBuffer(c) ? c : Buffer.from(c);
    size += b.length;
    if (size > limit) throw new ApiError(413, 'ERR_REQUEST_TOO_LARGE', `a forwarded actor call's body is larger than ${limit} bytes`);
    parts.push(b);
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** The calling side. */
export class PeerActors implements ActorPeers {
  private readonly transport: HttpTransport;
  private readonly caller: Caller;
  private readonly namespace: string;

  constructor(transport: HttpTransport, caller: Caller, namespace: string) {
    this.transport = transport;
    this.caller = caller;
    this.namespace = namespace;
  }

  async invoke(host: ActorHost, type: string, id: string, method: string, body: Uint8Array, headers: Record<string, string>): Promise<AppResponse> {
    const carried: Header[] = [];
    for (const [name, value] of Object.entries(headers)) if (CARRIED.has(name.toLowerCase())) carried.push({ name: name.toLowerCase(), value });
    const a = await this.call(host, 'PUT', `${actorPath(type, id)}/method/${seg(method)}`, Buffer.from(body.buffer, body.byteOffset, body.byteLength), carried);
    const out: Record<string, string> = {};
    for (const h of a.headers) if (h.name !== 'content-length' && out[h.name] === undefined) out[h.name] = h.value;
    return { status: a.status, headers: out, body: await bytesOf(a.body) };
  }

  async getState(host: ActorHost, type: string, id: string, key: string): Promise<Uint8Array | undefined> {
    const a = await this.call(host, 'GET', `${actorPath(type, id)}/state/${seg(key)}`);
    const body = await bytesOf(a.body);
    return a.status === 200 && body.length > 0 ? body : undefined;
  }

  async transact(host: ActorHost, type: string, id: string, ops: ActorStateOperation[]): Promise<void> {
    const wire = ops.map((o) => ({ operation: o.operation, key: o.key, value: o.value && Buffer.from(o.value).toString('base64'), metadata: o.metadata }));
    await this.done(this.call(host, 'POST', `${actorPath(type, id)}/state`, json(wire)));
  }

  async createTimer(host: ActorHost, type: string, id: string, name: string, req: TimerRequest): Promise<void> {
    await this.done(this.call(host, 'PUT', `${actorPath(type, id)}/timers/${seg(name)}`, json(req)));
  }

  async deleteTimer(host: ActorHost, type: string, id: string, name: string): Promise<void> {
    await this.done(this.call(host, 'DELETE', `${actorPath(type, id)}/timers/${seg(name)}`));
  }

  async fireReminder(host: ActorHost, r: StoredReminder): Promise<void> {
    await this.done(this.call(host, 'PUT', `${actorPath(r.actorType, r.actorId)}/remind/${seg(r.name)}`, json(r)));
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  /** An answer without a body to keep: read to its end, so its connection goes back to the pool. */
  private async done(answer: Promise<InvokeAnswer>): Promise<void> {
    await bytesOf((await answer).body);
  }

  private async call(host: ActorHost, method: string, path: string, body?: Buffer, headers: Header[] = []): Promise<InvokeAnswer> {
    try {
      return await this.transport.call({ appId: host.appId, namespace: this.namespace }, host.address, this.caller, { method, path, query: '', headers, body: body && Readable.from([body]) }, HOP);
    } catch (e) {
      if (e instanceof ApiError) throw e; // the host's own answer
      const code = (e as NodeJS.ErrnoException).code ?? '';
      if (!NOT_SENT.has(code)) throw e;
      this.transport.drop(host.address);
      throw new HostUnreachable(`the sidecar of app ${host.appId} at ${host.address} does not answer: ${(e as Error).message}`);
    }
  }
}

function json(v: unknown): Buffer {
  return Buffer.from(JSON.stringify(v));
}

function decoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw malformed(`"${s.slice(0, 60)}" in a forwarded actor call's path is not valid percent-encoding`);
  }
}

function parsed<T>(body: Buffer, check: (v: unknown) => v is T, what: string): T {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    throw malformed(`a forwarded ${what} is not JSON`);
  }
  if (!check(v)) throw malformed(`a forwarded ${what} does not have its shape`);
  return v;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isOps = (v: unknown): v is { operation: string; key: string; value?: string; metadata?: Record<string, string> }[] =>
  Array.isArray(v) && v.every((o) => isObject(o) && typeof o.operation === 'string' && typeof o.key === 'string' && (o.value === undefined || typeof o.value === 'string'));
const isReminder = (v: unknown): v is StoredReminder => isObject(v) && typeof v.actorType === 'string' && typeof v.actorId === 'string' && typeof v.name === 'string';

function answer(status: number, body?: Buffer, headers: Header[] = []): InvokeAnswer {
  return { status, headers, body: Readable.from(body && body.length > 0 ? [body] : []) };
}

/** The host's side: a forwarded call, run here as the runtime's own (never forwarded again). */
export function peerCallHandler(actors: ActorsService): ActorCallHandler {
  return async (head: RequestHead, body: Readable | undefined): Promise<InvokeAnswer> => {
    const parts = head.path.split('/');
    if (parts.length < 4 || parts.length > 5 || parts[0] !== '') throw malformed(`"${head.path.slice(0, 100)}" is not a forwarded actor call`);
    const [type, id, op, name] = parts.slice(1).map(decoded) as [string, string, string, string | undefined];
    const bytes = body ? await bytesOf(body, MAX_BODY) : Buffer.alloc(0);
    switch (`${head.method} ${op}${name === undefined ? '' : ' _'}`) {
      case 'PUT method _': {
        const headers: Record<string, string> = {};
        for (const h of head.headers) if (CARRIED.has(h.name) && headers[h.name] === undefined) headers[h.name] = h.value;
        const a = await actors.invoke(type, id, name!, bytes, headers, true);
        return answer(
          a.status,
          a.body,
          Object.entries(a.headers).map(([n, value]) => ({ name: n, value })),
        );
      }
      case 'GET state _': {
        const v = await actors.getState(type, id, name!, true);
        return v ? answer(200, Buffer.from(v.buffer, v.byteOffset, v.byteLength), [{ name: 'content-type', value: 'application/octet-stream' }]) : answer(204);
      }
      case 'POST state': {
        const ops = parsed(bytes, isOps, 'state transaction').map((o) => ({ operation: o.operation, key: o.key, value: o.value === undefined ? undefined : Buffer.from(o.value, 'base64'), metadata: isObject(o.metadata) ? o.metadata : undefined }));
        await actors.transact(type, id, ops, true);
        return answer(204);
      }
      case 'PUT timers _':
        await actors.createTimer(type, id, name!, parsed(bytes, isObject, 'timer') as TimerRequest, true);
        return answer(204);
      case 'DELETE timers _':
        await actors.deleteTimer(type, id, name!, true);
        return answer(204);
      case 'PUT remind _': {
        const r = parsed(bytes, isReminder, 'reminder');
        if (r.actorType !== type || r.actorId !== id || r.name !== name) throw malformed('a forwarded reminder names another actor or reminder than its path');
        await actors.fireReminder(r, true);
        return answer(204);
      }
      default:
        throw malformed(`${head.method} ${head.path.slice(0, 100)} is not a forwarded actor call`);
    }
  };
}
